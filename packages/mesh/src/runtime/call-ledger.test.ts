/** A node's memory of finished calls: found by reply subject, bounded, and honest about how far back it reaches. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { createCallLedger } from "./call-ledger.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test("finds the finished calls asked about, with their outcome, and nothing else", () => {
  const ledger = createCallLedger(8);
  ledger.finished("_INBOX.a.1", "ok");
  ledger.finished("_INBOX.a.2", "tool_failed");
  ledger.finished("_INBOX.b.1", "ok");
  assert.deepEqual(ledger.findFinished(new Set(["_INBOX.a.2", "_INBOX.a.1", "_INBOX.a.9"])), [
    { reply: "_INBOX.a.1", outcome: "ok" },
    { reply: "_INBOX.a.2", outcome: "tool_failed" },
  ]);
  assert.deepEqual(ledger.findFinished(new Set()), []);
});

test("forgets the oldest calls once full, and says its memory then reaches back only to the oldest kept", async () => {
  const ledger = createCallLedger(4);
  ledger.finished("r0", "ok");
  ledger.finished("r1", "ok");
  // Node's timers may fire a millisecond before performance.now() says the delay has passed, so
  // sleep past the figure checked.
  await sleep(75);
  // Not yet full: everything since the ledger was made is remembered.
  assert.ok(ledger.rememberedMs() >= 60, `remembers ${ledger.rememberedMs()} ms`);
  for (const reply of ["r2", "r3", "r4", "r5"]) ledger.finished(reply, "ok");
  assert.deepEqual(
    ledger
      .findFinished(new Set(["r0", "r1", "r2", "r5"]))
      .map((entry) => entry.reply)
      .sort(),
    ["r2", "r5"],
  );
  assert.equal(ledger.findFinished(new Set(["r0", "r1"])).length, 0);
  // The oldest kept (r2) finished just now, after the pause: the memory reaches back less than it.
  assert.ok(ledger.rememberedMs() < 60, `remembers ${ledger.rememberedMs()} ms`);
});

test("a disowned request stays refused, and others are not", () => {
  const ledger = createCallLedger(4);
  assert.equal(ledger.isDisowned("_INBOX.x.1"), false);
  ledger.disown("_INBOX.x.1");
  assert.equal(ledger.isDisowned("_INBOX.x.1"), true);
  assert.equal(ledger.isDisowned("_INBOX.x.2"), false);
});
