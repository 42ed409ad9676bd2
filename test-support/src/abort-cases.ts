/**
 * The two cases every client entry point holds against a server that never answers (a `SilentServer`):
 * a signal aborted before the call rejects at once and opens no connection; one aborted while the call
 * waits rejects within 100 ms and closes the connection. Registered as two `it` tests per entry point.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { SilentServer } from "./silent-server.ts";

export interface AbortCase<Client> {
  readonly name: string;
  readonly call: (client: Client, signal: AbortSignal) => Promise<unknown>;
}

/**
 * `reach` is read when a test runs (its server and client are made in a `before` hook); `isAborted`
 * checks the rejection is the package's own abort error.
 */
export function itHonoursAbort<Client>(
  { name, call }: AbortCase<Client>,
  reach: () => { readonly silent: SilentServer; readonly client: Client },
  isAborted: (error: unknown) => boolean,
): void {
  it(`${name}: a signal aborted before the call rejects at once and sends nothing`, async () => {
    const { silent, client } = reach();
    const accepted = silent.accepted;
    const started = performance.now();
    await assert.rejects(call(client, AbortSignal.abort()), isAborted);
    assert.ok(performance.now() - started < 50, "rejected at once");
    await sleep(20);
    assert.equal(silent.accepted, accepted, "no connection was opened");
  });

  it(`${name}: a signal aborted mid-wait rejects promptly and closes the connection`, async () => {
    const { silent, client } = reach();
    const accepted = silent.accepted;
    const controller = new AbortController();
    const pending = call(client, controller.signal);
    pending.catch(() => undefined);
    assert.ok(await silent.waitForConnection(accepted + 1), "the request reached the server");
    const aborted = performance.now();
    controller.abort();
    await assert.rejects(pending, isAborted);
    const elapsed = performance.now() - aborted;
    assert.ok(elapsed < 100, `rejected ${Math.round(elapsed)} ms after the abort`);
    assert.ok(await silent.waitForNoneOpen(), "the connection was closed");
  });
}
