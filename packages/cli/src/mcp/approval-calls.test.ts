/**
 * Approvals that nobody answers do not pile up: the open ones are bounded (a call past the bound is
 * refused, not paused), answered ones are deleted after their keeping time while open ones stay, a
 * form nobody answers ends at the approval's expiry (or when its client goes away) and leaves the call
 * paused, and the listing finds every open approval however many answered ones the store holds.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import type { ClientRequestOptions, ElicitAnswer, ToolCallResult } from "@tackle/core";
import type { ToolSource } from "../tool-source/tool-source.ts";
import { type ApprovalCallsOptions, createApprovalCalls } from "./approval-calls.ts";

const folder = mkdtempSync(join(tmpdir(), "tackle-approval-calls-"));
after(() => rmSync(folder, { recursive: true, force: true }));
let stores = 0;

/** A source with one tool, `ledger.pay`, that counts its runs. */
function ledger() {
  const paid: unknown[] = [];
  const source: ToolSource = {
    description: "test",
    catalogue: async () => [
      {
        module: "ledger",
        status: "ok",
        errors: [],
        tools: [
          {
            name: "pay",
            description: "Pays",
            inputSchema: {
              type: "object",
              properties: { to: { type: "string" }, amount: { type: "number" } },
              required: ["to", "amount"],
            },
          },
        ],
      },
    ],
    call: async (_name, args) => {
      paid.push(args);
      return { ok: true, output: { paid: true } };
    },
    close: async () => {},
  };
  return { source, paid };
}

function approvals(source: ToolSource, options: Partial<ApprovalCallsOptions> = {}) {
  stores += 1;
  return createApprovalCalls(source, {
    tools: ["ledger.pay"],
    store: join(folder, `approvals-${stores}.sqlite`),
    ...options,
  });
}

function outputOf(result: ToolCallResult): Record<string, unknown> {
  assert.ok(result.ok, JSON.stringify(result));
  return result.output as Record<string, unknown>;
}

test("past the bound of open approvals a new call is refused, not paused; answering one makes room", async () => {
  const { source, paid } = ledger();
  const calls = approvals(source, { maxOpen: 2 });
  try {
    const first = outputOf(await calls.call("ledger.pay", { to: "Ada", amount: 1 }, {}));
    outputOf(await calls.call("ledger.pay", { to: "Bo", amount: 2 }, {}));
    const refused = await calls.call("ledger.pay", { to: "Cy", amount: 3 }, {});
    assert.equal(refused.ok, false);
    assert.equal(refused.ok ? undefined : refused.error.code, "too_many_approvals");
    assert.match(refused.ok ? "" : refused.error.message, /tackle\.approve/);
    const listed = outputOf(await calls.call("tackle.approvals", {}, {})).approvals as unknown[];
    assert.equal(listed.length, 2, "the refused call left nothing paused");

    outputOf(await calls.call("tackle.approve", { approval: first.approval, approved: true }, {}));
    assert.equal(paid.length, 1);
    const again = outputOf(await calls.call("ledger.pay", { to: "Cy", amount: 3 }, {}));
    assert.equal(again.status, "awaiting_approval");
  } finally {
    await calls.close();
  }
});

test("calls at once, from two servers on one store, never pass the bound together (they did: each counted before starting)", async () => {
  const { source, paid } = ledger();
  const store = join(folder, "approvals-shared.sqlite");
  const servers = [approvals(source, { maxOpen: 5, store }), approvals(source, { maxOpen: 5, store })];
  try {
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, index) =>
        (servers[index % 2] as ReturnType<typeof approvals>).call(
          "ledger.pay",
          { to: `p${index}`, amount: index },
          {},
        ),
      ),
    );
    const codes = results.map((result) => (result.ok ? "paused" : result.error.code));
    assert.equal(codes.filter((code) => code === "paused").length, 5, codes.join(","));
    assert.equal(codes.filter((code) => code === "too_many_approvals").length, 19, codes.join(","));
    const listed = outputOf(
      await (servers[1] as ReturnType<typeof approvals>).call("tackle.approvals", {}, {}),
    );
    assert.equal((listed.approvals as unknown[]).length, 5);
    assert.equal(paid.length, 0);
  } finally {
    for (const server of servers) await server.close();
  }
});

test("answered approvals are deleted after their keeping time; open ones stay, however old", async () => {
  const { source } = ledger();
  const calls = approvals(source, { keepAnsweredMs: 200 });
  try {
    const answered = outputOf(await calls.call("ledger.pay", { to: "Ada", amount: 1 }, {}));
    const open = outputOf(await calls.call("ledger.pay", { to: "Bo", amount: 2 }, {}));
    outputOf(await calls.call("tackle.approve", { approval: answered.approval, approved: false }, {}));
    // A second answer soon after reads the first one's outcome.
    const second = outputOf(
      await calls.call("tackle.approve", { approval: answered.approval, approved: true }, {}),
    );
    assert.equal(second.alreadyAnswered, true);

    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const listed = outputOf(await calls.call("tackle.approvals", {}, {})).approvals as { approval: string }[];
    assert.deepEqual(
      listed.map((entry) => entry.approval),
      [open.approval],
    );
    const gone = await calls.call("tackle.approve", { approval: answered.approval, approved: true }, {});
    assert.equal(gone.ok ? undefined : gone.error.code, "not_found", "the answered run was deleted");
  } finally {
    await calls.close();
  }
});

test("a form nobody answers ends at the expiry, and one whose client went away at once: both stay paused", async () => {
  const { source, paid } = ledger();
  const calls = approvals(source, { expiresInMs: 1_500 });
  const asked: (ClientRequestOptions | undefined)[] = [];
  // A client that never answers: its request ends only by its deadline or its signal, as the SDK's does.
  const silent = {
    elicit: (_request: unknown, options?: ClientRequestOptions) =>
      new Promise<ElicitAnswer>((_resolve, reject) => {
        asked.push(options);
        const timer = setTimeout(() => reject(new Error("Request timed out")), options?.timeoutMs);
        options?.signal?.addEventListener("abort", () => {
          clearTimeout(timer);
          reject(new Error("Connection closed"));
        });
      }),
  };
  try {
    const started = Date.now();
    const expired = outputOf(await calls.call("ledger.pay", { to: "Ada", amount: 1 }, { client: silent }));
    assert.equal(expired.status, "awaiting_approval");
    assert.match(String(expired.notAsked), /timed out/);
    assert.ok(
      (asked[0]?.timeoutMs ?? Number.POSITIVE_INFINITY) <= 1_500,
      "the form is asked within the expiry",
    );
    assert.ok(Date.now() - started < 30_000);

    const gone = new AbortController();
    const call = calls.call("ledger.pay", { to: "Bo", amount: 2 }, { client: silent, signal: gone.signal });
    setTimeout(() => gone.abort(), 100);
    const left = outputOf(await call);
    assert.equal(left.status, "awaiting_approval");
    assert.match(String(left.notAsked), /closed/);

    const listed = outputOf(await calls.call("tackle.approvals", {}, {})).approvals as unknown[];
    assert.equal(listed.length, 2);
    assert.equal(paid.length, 0, "nothing ran without an answer");
  } finally {
    await calls.close();
  }
});

test("the listing finds every open approval behind more answered ones than a page holds", async () => {
  const { source } = ledger();
  const calls = approvals(source);
  try {
    for (let index = 0; index < 120; index += 1) {
      const paused = outputOf(await calls.call("ledger.pay", { to: `P${index}`, amount: index }, {}));
      outputOf(await calls.call("tackle.approve", { approval: paused.approval, approved: false }, {}));
    }
    const open = outputOf(await calls.call("ledger.pay", { to: "Last", amount: 1 }, {}));
    const listed = outputOf(await calls.call("tackle.approvals", {}, {})).approvals as { approval: string }[];
    assert.deepEqual(
      listed.map((entry) => entry.approval),
      [open.approval],
    );
  } finally {
    await calls.close();
  }
});
