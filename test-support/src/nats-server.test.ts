import assert from "node:assert/strict";
import { afterEach, beforeEach, test } from "node:test";
import { startNatsServer } from "./nats-server.ts";

// A missing server must fail the test with the install command, never skip: NATS_SERVER_BIN names the
// one binary to try, so pointing it at nothing stands in for a machine without nats-server.
let saved: string | undefined;
beforeEach(() => {
  saved = process.env.NATS_SERVER_BIN;
});
afterEach(() => {
  if (saved === undefined) delete process.env.NATS_SERVER_BIN;
  else process.env.NATS_SERVER_BIN = saved;
});

test("a missing nats-server rejects with the install command", async () => {
  process.env.NATS_SERVER_BIN = "/nonexistent/nats-server";
  await assert.rejects(startNatsServer(), (error: unknown) => {
    assert.ok(error instanceof Error);
    assert.match(error.message, /apt-get install -y nats-server/);
    assert.match(error.message, /\/nonexistent\/nats-server/, "names the binary it tried");
    return true;
  });
});

test("without NATS_SERVER_BIN the server on PATH starts and listens", async () => {
  delete process.env.NATS_SERVER_BIN;
  const server = await startNatsServer();
  try {
    assert.match(server.url, /^nats:\/\/127\.0\.0\.1:\d+$/);
  } finally {
    await server.close();
  }
});
