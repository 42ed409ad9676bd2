/**
 * The durable promise, across real processes: Orders.get runs once across pause and resume, and the
 * refund happens only after approval, once.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { readLedger } from "./services.ts";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));
const run = promisify(execFile);

describe("examples/refund", () => {
  let directory: string;
  let files: string[];
  beforeEach(() => {
    directory = mkdtempSync(join(tmpdir(), "refund-example-"));
    files = ["--db", join(directory, "runs.sqlite"), "--ledger", join(directory, "calls.ledger")];
  });
  afterEach(() => rmSync(directory, { recursive: true, force: true }));

  async function cli(...args: string[]): Promise<string> {
    const { stdout } = await run(process.execPath, ["--conditions=@tackle/source", main, ...files, ...args]);
    return stdout;
  }

  test("Orders.get runs once across pause and resume; the refund only after approval", async () => {
    const started = JSON.parse(await cli("start", "ORD-42")) as { threadId: string; status: string };
    assert.equal(started.status, "paused");
    assert.deepEqual(
      readLedger(files[3] as string).map((entry) => entry.call),
      ["Orders.get"],
    );
    const finished = JSON.parse(await cli("approve", started.threadId, "yes")) as {
      status: string;
      reply: string;
    };
    assert.equal(finished.status, "completed");
    assert.equal(finished.reply, "refunded (rf_ORD-42)");
    const ledger = readLedger(files[3] as string);
    assert.deepEqual(
      ledger.map((entry) => entry.call),
      ["Orders.get", "Payments.refund"],
    );
    assert.match(ledger[1]?.idempotencyKey ?? "", /:refund#0\/2$/);
    // Approving again (a double click) changes nothing.
    await cli("approve", started.threadId, "yes").catch(() => undefined);
    assert.equal(readLedger(files[3] as string).length, 2);
    const frames = await cli("frames", started.threadId);
    assert.match(frames, /interrupt/);
    assert.match(frames, /run_completed/);
  });

  test("approving a thread that waits for nothing says so in one line, exit 1", async () => {
    const refused = await cli("approve", "no-such-thread", "yes").then(
      () => assert.fail("approve of an unknown thread succeeded"),
      (error: { code?: number; stderr?: string }) => error,
    );
    assert.equal(refused.code, 1);
    assert.equal(refused.stderr, "refund: Thread no-such-thread waits for no approval\n");
  });

  test("a declined refund is never paid", async () => {
    const started = JSON.parse(await cli("start", "ORD-7")) as { threadId: string };
    const finished = JSON.parse(await cli("approve", started.threadId, "no")) as { reply: string };
    assert.equal(finished.reply, "kept");
    assert.deepEqual(
      readLedger(files[3] as string).map((entry) => entry.call),
      ["Orders.get"],
    );
  });
});
