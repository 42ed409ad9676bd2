import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { tool as langchainTool } from "@langchain/core/tools";
import { z } from "zod";
import { applyToolCards, type TempStore, tempSqliteStore } from "../../test/helpers.ts";
import { createGraph } from "../graph/create-graph.ts";
import type { ToolPolicies } from "../policy/tool-policy.ts";
import { createRunner } from "../runner/create-runner.ts";
import { withDurableTools } from "./index.ts";

// A fresh SQLite store for every test in this file, whichever block it is in.
let temp: TempStore;
beforeEach(() => {
  temp = tempSqliteStore();
});
afterEach(() => temp.cleanup());

describe("/langchain withDurableTools: journal and approval", () => {
  test("tools journal, pause for approval, redact frames only, and LangChain's callbacks never see the pause as an error", async () => {
    const charged: string[] = [];
    const lookups: string[] = [];
    const callbackErrors: unknown[] = [];
    const callbacks = [
      BaseCallbackHandler.fromMethods({
        handleToolError(error) {
          callbackErrors.push(error);
        },
      }),
    ];
    const lookup = langchainTool(
      async ({ id }: { id: string }) => {
        lookups.push(id);
        return JSON.stringify({ id, total: 249.9 });
      },
      { name: "lookup", description: "Looks an order up", schema: z.object({ id: z.string() }) },
    );
    const charge = langchainTool(
      async ({ cardNumber, amount }: { cardNumber: string; amount: number }) => {
        charged.push(cardNumber);
        return `charged ${amount}`;
      },
      {
        name: "charge",
        description: "Charges a card",
        schema: z.object({ cardNumber: z.string(), amount: z.number() }),
      },
    );
    const policies = JSON.parse(
      JSON.stringify({ charge: { approve: true, redact: ["cardNumber"] } } satisfies ToolPolicies),
    ) as ToolPolicies;
    const graph = createGraph<{ results?: string[] }>("lc").node("agent", async (_state, ctx) => {
      const [wrappedLookup, wrappedCharge] = withDurableTools(ctx, [lookup, charge], policies);
      const order = await wrappedLookup?.invoke({ id: "ORD-42" }, { callbacks });
      const receipt = await wrappedCharge?.invoke(
        { cardNumber: "4242424242424242", amount: 249.9 },
        { callbacks },
      );
      return { results: [String(order), String(receipt)] };
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    assert.equal(paused.status, "paused");
    assert.deepEqual(charged, []);
    const done = await runner.resume("t", { [paused.interrupts[0]?.id ?? ""]: true });
    assert.equal(done.status, "completed");
    assert.deepEqual(done.state.results, ['{"id":"ORD-42","total":249.9}', "charged 249.9"]);
    assert.deepEqual(charged, ["4242424242424242"]);
    assert.deepEqual(lookups, ["ORD-42"]);
    assert.deepEqual(callbackErrors, []);
    const frames = await runner.frames("t");
    assert.ok(!JSON.stringify(frames).includes("4242424242424242"));
    const cards = applyToolCards(frames);
    assert.deepEqual(
      [...cards.values()].map((card) => `${card.id} ${card.name} ${card.status}`),
      ["agent:tool:0 lookup completed", "agent:tool:1 charge completed"],
    );
    assert.deepEqual(cards.get("agent:tool:1")?.params, { cardNumber: "[redacted]", amount: 249.9 });
  });
});

describe("/langchain withDurableTools: hidden tools and failures", () => {
  test("a tool whose policy says show: false runs once and no tool_call frame names it", async () => {
    const audits: string[] = [];
    const audit = langchainTool(
      async ({ note }: { note: string }) => {
        audits.push(note);
        return "noted";
      },
      { name: "audit", description: "Writes an audit note", schema: z.object({ note: z.string() }) },
    );
    const charge = langchainTool(async () => "charged", {
      name: "charge",
      description: "Charges",
      schema: z.object({ amount: z.number() }),
    });
    const graph = createGraph("lc-hidden").node("agent", async (_state, ctx) => {
      const [wrappedAudit, wrappedCharge] = withDurableTools(ctx, [audit, charge], {
        audit: { show: false },
        charge: { approve: true },
      });
      await wrappedAudit?.invoke({ note: "refund" });
      await wrappedCharge?.invoke({ amount: 5 });
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    assert.equal(paused.status, "paused");
    const done = await runner.resume("t", { [paused.interrupts[0]?.id ?? ""]: true });
    assert.equal(done.status, "completed");
    assert.deepEqual(audits, ["refund"], "the hidden tool's side effect happened once");
    const named = (await runner.frames("t"))
      .filter((frame) => frame.type === "tool_call")
      .map((frame) => (frame.data as { name: string }).name);
    assert.ok(named.includes("charge"), "the shown tool has its frames");
    assert.ok(!named.includes("audit"), `no tool_call frame names the hidden tool: ${named.join(", ")}`);
  });

  test("a failing tool still ends its card as error", async () => {
    const broken = langchainTool(
      async () => {
        throw new Error("upstream down");
      },
      { name: "broken", description: "Fails", schema: z.object({}) },
    );
    const graph = createGraph("lc-error").node("agent", async (_state, ctx) => {
      const [wrapped] = withDurableTools(ctx, [broken]);
      await wrapped?.invoke({}).catch(() => undefined);
      return {};
    });
    const runner = createRunner({ store: temp.store });
    await runner.start(graph, {}, { threadId: "t" });
    const card = applyToolCards(await runner.frames("t")).get("agent:tool:0");
    assert.equal(card?.status, "error");
    assert.equal(card?.error, "upstream down");
  });
});
