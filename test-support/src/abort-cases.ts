/**
 * The two cases every client entry point holds against a server that never answers (a `SilentServer`):
 * a signal aborted before the call rejects at once and opens no connection; one aborted while the call
 * waits rejects promptly and closes the connection. Registered as two `it` tests per entry point, each
 * on a silent server of its own (so a connection can only be this call's).
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { startSilentServer } from "./silent-server.ts";

/**
 * How soon an abort must end a wait in these tests: far under the deadlines the tests set (10 s or
 * more, so only the signal can have ended the wait), and loose enough for a loaded 2-core machine
 * (a prompt abort measured 5–35 ms quiet and up to ~160 ms under load).
 */
export const promptlyMs = 1_000;

export interface AbortCase<Client> {
  readonly name: string;
  readonly call: (client: Client, signal: AbortSignal) => Promise<unknown>;
}

/**
 * `clientFor` makes the package's client for a server's `http://127.0.0.1:<port>` URL, with a deadline
 * of 10 s or more; `isAborted` checks the rejection is the package's own abort error.
 */
export function itHonoursAbort<Client>(
  { name, call }: AbortCase<Client>,
  clientFor: (url: string) => Client,
  isAborted: (error: unknown) => boolean,
): void {
  it(`${name}: a signal aborted before the call rejects at once and sends nothing`, async () => {
    const silent = await startSilentServer();
    try {
      const started = performance.now();
      await assert.rejects(call(clientFor(silent.url), AbortSignal.abort()), isAborted);
      assert.ok(performance.now() - started < promptlyMs, "rejected at once");
      await sleep(50);
      assert.equal(silent.accepted, 0, "no connection was opened");
    } finally {
      await silent.close();
    }
  });

  it(`${name}: a signal aborted mid-wait rejects promptly and closes the connection`, async () => {
    const silent = await startSilentServer();
    try {
      const controller = new AbortController();
      const pending = call(clientFor(silent.url), controller.signal);
      pending.catch(() => undefined);
      assert.ok(await silent.waitForConnection(1), "the request reached the server");
      const aborted = performance.now();
      controller.abort();
      await assert.rejects(pending, isAborted);
      const elapsed = performance.now() - aborted;
      assert.ok(elapsed < promptlyMs, `rejected ${Math.round(elapsed)} ms after the abort`);
      assert.ok(await silent.waitForNoneOpen(), "the connection was closed");
    } finally {
      await silent.close();
    }
  });
}
