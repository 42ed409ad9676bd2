/**
 * A request under an idempotency key is answered by what the key recorded (ADR 0567, found by
 * idempotent-writes.property.test.ts): one arriving while another request under its key runs in this
 * process waits for it, not refused at once (the running one may fail, or lose the key to another
 * process); one whose write fails after another process recorded the key is refused as reused. Two
 * services on one SQLite file, as two processes on one store.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { createMemoryService, createSqliteStore, MemoryError, type MemoryService } from "@tackle/memory";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-key-running-"));
const path = join(directory, "memory.db");
const services: MemoryService[] = [];
after(async () => {
  for (const service of services) await service.close();
  rmSync(directory, { recursive: true, force: true });
});

function service(): MemoryService {
  const made = createMemoryService({ store: createSqliteStore({ path }), resumeJobs: false });
  services.push(made);
  return made;
}

/** A write that runs until `release` is called, then does `end`. */
function held<T>(end: () => T) {
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let started = () => {};
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  return {
    run: async () => {
      started();
      await released;
      return end();
    },
    running,
    release: () => release(),
  };
}

it("a request that arrives while another request under its key runs, and the running one fails, runs", async () => {
  const here = services[0] ?? service();
  const first = held((): string => {
    throw new Error("the first write failed");
  });
  const failing = here.writeOnce("t", { key: "k-fails", request: "first" }, first.run);
  await first.running;
  const other = here.writeOnce("t", { key: "k-fails", request: "second" }, async () => "second's answer");
  first.release();
  await assert.rejects(failing, /the first write failed/);
  assert.deepEqual(await other, { answer: "second's answer", replayed: false }, "not refused as reused");
});

it("a copy of the winner's request, arriving while this process's losing request runs, answers the winner's answer", async () => {
  const here = services[0] ?? service();
  const there = service();
  const losing = held(() => "loser's answer");
  const lost = here.writeOnce("t", { key: "k-race", request: "loser" }, losing.run);
  await losing.running;
  // Another process runs another request under the key at the same time.
  const winning = held(() => "winner's answer");
  const won = there.writeOnce("t", { key: "k-race", request: "winner" }, winning.run);
  await winning.running;
  // A copy of that request reaches this process while both run; then the other process commits first.
  const copy = here.writeOnce("t", { key: "k-race", request: "winner" }, async () => "run again");
  winning.release();
  assert.deepEqual(await won, { answer: "winner's answer", replayed: false });
  losing.release();
  await assert.rejects(lost, (error: Error & { code?: string }) => error.code === "idempotency_key_reused");
  assert.deepEqual(await copy, { answer: "winner's answer", replayed: true });
});

it("a request whose write fails after another process recorded its key is refused as reused, not answered its failure", async () => {
  const here = services[0] ?? service();
  const there = service();
  const winning = held(() => "winner's answer");
  const won = there.writeOnce("t", { key: "k-failed-loser", request: "delete it" }, winning.run);
  await winning.running;
  // This process's request runs into the other's write once that commits (an update of what it deleted).
  const lost = here.writeOnce("t", { key: "k-failed-loser", request: "update it" }, async () => {
    await won;
    throw new MemoryError("conflict", "Memory m is deleted; its history stays readable", 409);
  });
  winning.release();
  assert.deepEqual(await won, { answer: "winner's answer", replayed: false });
  await assert.rejects(lost, (error: unknown) => {
    assert.ok(MemoryError.isInstance(error), String(error));
    assert.equal(error.code, "idempotency_key_reused");
    return true;
  });
});
