/** Human in the loop: approve, decline with a reason, approve with edited arguments, and expiry. */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createGraph, createRunner, DurableError, runIntegratedTool } from "@tackle/durable";
import { applyToolCards, type TempStore, tempSqliteStore } from "./helpers.ts";

const chargeSchema = {
  type: "object",
  properties: { amount: { type: "number", maximum: 100 }, note: { type: "string" } },
  required: ["amount"],
  additionalProperties: false,
};

function chargeGraph(charged: unknown[], expiresInMs?: number) {
  return createGraph<{ amount: number; reply?: unknown }>("charge").node("pay", async (state, ctx) => {
    const reply = await runIntegratedTool(
      ctx,
      "charge",
      { amount: state.amount },
      { approve: true },
      (args) => {
        charged.push(args);
        return { charged: (args as { amount: number }).amount };
      },
      {
        inputSchema: chargeSchema,
        ...(expiresInMs === undefined ? {} : { approvalExpiresInMs: expiresInMs }),
      },
    );
    return { reply };
  });
}

const isCode = (code: string) => (error: unknown) => DurableError.isInstance(error) && error.code === code;

describe("approvals", () => {
  let temp: TempStore;
  beforeEach(() => {
    temp = tempSqliteStore();
  });
  afterEach(() => temp.cleanup());

  test("approve with edited arguments: checked against the schema, journaled, bound to their fingerprint, run with them", async () => {
    const charged: unknown[] = [];
    const graph = chargeGraph(charged);
    const runner = createRunner({ store: temp.store, graphs: [graph] });
    const paused = await runner.start(graph, { amount: 250 }, { threadId: "t" });
    const [open] = paused.interrupts;
    assert.ok(open !== undefined);
    const request = open.request as {
      inputSchema: unknown;
      responseSchema: { properties: { editedArgs: unknown } };
    };
    assert.deepEqual(request.inputSchema, chargeSchema);
    assert.deepEqual(request.responseSchema.properties.editedArgs, chargeSchema);

    const before = await temp.store.readJournal("t");
    // Over the schema's maximum, a wrong type, an unknown field: refused, nothing stored, still paused.
    for (const editedArgs of [{ amount: 250 }, { amount: "lots" }, { amount: 5, to: "me" }]) {
      await assert.rejects(
        runner.resume("t", { [open.id]: { approved: true, editedArgs } }),
        isCode("invalid_edit"),
      );
    }
    await assert.rejects(
      runner.resume("t", { [open.id]: { approved: false, editedArgs: { amount: 5 } } }),
      isCode("invalid_edit"),
    );
    assert.deepEqual(await temp.store.readJournal("t"), before);
    assert.equal((await runner.get("t"))?.status, "paused");

    const done = await runner.resume("t", {
      [open.id]: { approved: true, editedArgs: { amount: 90, note: "capped" } },
    });
    assert.equal(done.status, "completed");
    assert.deepEqual(charged, [{ amount: 90, note: "capped" }]);
    assert.deepEqual(done.state.reply, { charged: 90 });
    const card = applyToolCards(await runner.frames("t")).get("pay:tool:0");
    assert.deepEqual([card?.status, card?.params], ["completed", { amount: 90, note: "capped" }]);
    const answer = (await temp.store.readJournal("t")).find((record) => record.key === `answer:${open.id}`);
    assert.match(answer?.value ?? "", /"editedArgs"/);
    assert.match(answer?.value ?? "", /"fingerprint":"[0-9a-f]{16}"/);
    // Replaying the same resume is harmless; a different edit is a conflict.
    await runner.resume("t", { [open.id]: { approved: true, editedArgs: { amount: 90, note: "capped" } } });
    await assert.rejects(
      runner.resume("t", { [open.id]: { approved: true, editedArgs: { amount: 91 } } }),
      isCode("answer_conflict"),
    );
    assert.equal(charged.length, 1);
  });

  test("declined with a reason: the tool never runs and the model's result carries the reason", async () => {
    const charged: unknown[] = [];
    const graph = chargeGraph(charged);
    const runner = createRunner({ store: temp.store, graphs: [graph] });
    const paused = await runner.start(graph, { amount: 20 }, { threadId: "t" });
    const done = await runner.resume("t", {
      [paused.interrupts[0]?.id ?? ""]: { approved: false, reason: "use the company card" },
    });
    assert.deepEqual(done.state.reply, { declined: true, reason: "use the company card" });
    assert.deepEqual(charged, []);
    const card = applyToolCards(await runner.frames("t")).get("pay:tool:0");
    assert.deepEqual([card?.status, card?.reason], ["declined", "use the company card"]);
  });

  test("an approval nobody answers expires: the runner that paused resumes it as declined (expired), never a hang", async () => {
    const charged: unknown[] = [];
    const graph = chargeGraph(charged, 80);
    const runner = createRunner({ store: temp.store, graphs: [graph] });
    const paused = await runner.start(graph, { amount: 20 }, { threadId: "t" });
    const expiresAt = (paused.interrupts[0]?.request as { expiresAt: string } | undefined)?.expiresAt ?? "";
    assert.ok(Date.parse(expiresAt) > Date.now() - 1000);
    const deadline = Date.now() + 10_000;
    let status: string = paused.status;
    while (status !== "completed") {
      assert.ok(Date.now() < deadline, "the expiry never resumed the run");
      await sleep(20);
      status = (await runner.get("t"))?.status ?? "unknown";
    }
    const done = await runner.get<{ reply: { declined: boolean; expired: boolean; reason: string } }>("t");
    assert.equal(done?.state.reply.declined, true);
    assert.equal(done?.state.reply.expired, true);
    assert.match(done?.state.reply.reason ?? "", /expired at/);
    assert.deepEqual(charged, []);
    await runner.close();
  });

  test("an answer after expiry is refused with approval_expired; a resume then answers it as expired", async () => {
    const charged: unknown[] = [];
    const graph = chargeGraph(charged, 30);
    const first = createRunner({ store: temp.store, graphs: [graph] });
    const paused = await first.start(graph, { amount: 20 }, { threadId: "t" });
    await first.close(); // its expiry timer goes with it: another process answers later
    await sleep(60);
    const second = createRunner({ store: temp.store, graphs: [graph] });
    const id = paused.interrupts[0]?.id ?? "";
    await assert.rejects(second.resume("t", { [id]: { approved: true } }), isCode("approval_expired"));
    assert.equal((await second.get("t"))?.status, "paused");
    const done = await second.resume("t");
    assert.equal(done.status, "completed");
    assert.equal((done.state.reply as { expired: boolean }).expired, true);
    assert.deepEqual(charged, []);
  });
});

describe("approvals under redaction", () => {
  let temp: TempStore;
  beforeEach(() => {
    temp = tempSqliteStore();
  });
  afterEach(() => temp.cleanup());

  test("a redacted value does not enter the approval's fingerprint, so no one can guess it from the interrupt; the tool still gets it", async () => {
    const paid: unknown[] = [];
    const graph = createGraph<{ pin: string }>("pin").node("pay", async (state, ctx) => {
      await runIntegratedTool(
        ctx,
        "pay",
        { pin: state.pin, amount: 5 },
        { approve: true, redact: ["pin"] },
        (args) => paid.push(args),
      );
      return {};
    });
    const runner = createRunner({ store: temp.store });
    const one = await runner.start(graph, { pin: "0427" }, { threadId: "one" });
    const other = await runner.start(graph, { pin: "9999" }, { threadId: "other" });
    const request = one.interrupts[0]?.request as { params: unknown; fingerprint: string };
    assert.deepEqual(request.params, { pin: "[redacted]", amount: 5 });
    // Two calls that differ only in the redacted value show the same fingerprint and interrupt id.
    assert.equal(
      request.fingerprint,
      (other.interrupts[0]?.request as { fingerprint?: string } | undefined)?.fingerprint,
    );
    assert.equal(one.interrupts[0]?.id, other.interrupts[0]?.id);
    const done = await runner.resume("one", { [one.interrupts[0]?.id ?? ""]: { approved: true } });
    assert.equal(done.status, "completed");
    assert.deepEqual(paid, [{ pin: "0427", amount: 5 }]);
  });
});
