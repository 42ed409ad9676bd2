/**
 * The console reads at most 16 sign-ins at once, whoever sends them (ADR 0273), over real loopback
 * HTTP: 200 slow sign-ins, each on a connection of its own declaring a body it sends a few bytes of,
 * hold 16 places; the other 184 are refused 429 `overloaded` with `Retry-After: 1` before their bodies
 * are read, and so is a correct sign-in while the slow ones last. Once they end — half finishing their
 * bodies with a wrong token (401), half leaving — a correct sign-in is served.
 */
import assert from "node:assert/strict";
import { type ClientRequest, request as httpRequest, type IncomingMessage } from "node:http";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createToolSet, silentLogger } from "@tackle/core";
import { underLoadMs } from "@tackle/test-support";
import { maxSignIns } from "../src/console/request-bounds.ts";
import { type RunningConsole, startConsole } from "../src/console/start-console.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";

const token = "console-sign-in-bound-token-0123456789";
let running: RunningConsole;
let origin = "";

before(async () => {
  running = await startConsole({
    source: createEmbeddedToolSource([
      { module: "none", toolset: createToolSet([]), errors: [], close: () => {} },
    ]),
    listen: { host: "127.0.0.1", port: 0 },
    token,
    logger: silentLogger,
  });
  origin = `http://127.0.0.1:${running.port}`;
});
after(() => running?.close());

/** A sign-in that sends its head and the start of its body, then waits to be finished or dropped. */
interface SlowSignIn {
  /** Its answer, once one comes. */
  readonly answer: Promise<{ status: number; retryAfter: string | undefined; text: string } | undefined>;
  readonly answered: () => boolean;
  /** Its connection closed. */
  readonly closed: Promise<void>;
  /** Sends the rest of the body. */
  finish(): void;
  /** Drops the connection. */
  leave(): void;
}

const wrongBody = JSON.stringify({ token: "not-the-token-at-all-000000000000" });

function slowSignIn(): SlowSignIn {
  let done = false;
  const outgoing: ClientRequest = httpRequest(`${origin}/api/session`, {
    method: "POST",
    agent: false,
    headers: {
      origin,
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(wrongBody)),
    },
  });
  const answer = new Promise<{ status: number; retryAfter: string | undefined; text: string } | undefined>(
    (resolve) => {
      outgoing.on("error", () => resolve(undefined));
      outgoing.on("close", () => resolve(undefined));
      outgoing.on("response", (response: IncomingMessage) => {
        done = true;
        let text = "";
        response.on("data", (chunk) => (text += String(chunk)));
        response.on("error", () => resolve(undefined));
        response.on("end", () => {
          const retryAfter = response.headers["retry-after"];
          resolve({ status: response.statusCode ?? 0, retryAfter, text });
        });
      });
    },
  );
  const closed = new Promise<void>((resolve) => outgoing.on("close", () => resolve()));
  outgoing.flushHeaders();
  outgoing.write(wrongBody.slice(0, 5));
  return {
    answer,
    answered: () => done,
    closed,
    finish: () => outgoing.end(wrongBody.slice(5)),
    leave: () => outgoing.destroy(),
  };
}

const signIn = () =>
  fetch(`${origin}/api/session`, {
    method: "POST",
    headers: { origin, "content-type": "application/json" },
    body: JSON.stringify({ token }),
  });

async function until(what: string, check: () => boolean | Promise<boolean>, ms = underLoadMs(15_000)) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(20);
  }
}

test("200 slow sign-ins hold 16 places; the rest are refused 429 before their bodies are read", async () => {
  const count = 200;
  const slow = Array.from({ length: count }, () => slowSignIn());
  try {
    const refused = () => slow.filter((signIn) => signIn.answered());
    await until(`${count - maxSignIns} sign-ins refused`, () => refused().length >= count - maxSignIns);
    await sleep(200);
    assert.equal(refused().length, count - maxSignIns, "exactly the sign-ins past the bound were answered");
    for (const signIn of refused()) {
      const answer = await signIn.answer;
      assert.equal(answer?.status, 429, answer?.text);
      assert.equal(answer?.retryAfter, "1");
      const error = (
        JSON.parse(answer?.text ?? "{}") as { error: { code: string; message: string; data: unknown } }
      ).error;
      assert.equal(error.code, "overloaded");
      assert.deepEqual(error.data, { retryable: true, retryAfterSeconds: 1, maxSignIns });
      assert.match(error.message, /16 sign-ins already, its most at once; retry in 1 s/);
    }
    // A refused sign-in's connection is closed by the console: a stranger keeps no socket past the bound.
    await Promise.race([
      Promise.all(refused().map((signIn) => signIn.closed)),
      sleep(underLoadMs(10_000), undefined, { ref: false }).then(() =>
        assert.fail("the refused sign-ins' connections stayed open"),
      ),
    ]);

    // While the slow ones last, a correct sign-in is refused too: the bound is the whole console's.
    const meanwhile = await signIn();
    assert.equal(meanwhile.status, 429, await meanwhile.text());

    // They end: half send the rest of their wrong bodies (401), half leave without a word.
    const held = slow.filter((signIn) => !signIn.answered());
    held.forEach((signIn, index) => {
      if (index % 2 === 0) signIn.finish();
      else signIn.leave();
    });
    const ended = await Promise.all(held.map((signIn) => signIn.answer));
    const finished = ended.filter((_, index) => index % 2 === 0).map((answer) => answer?.status);
    assert.deepEqual(finished, Array(maxSignIns / 2).fill(401), "a finished wrong sign-in is refused 401");

    let status = 0;
    await until("a correct sign-in served", async () => {
      const answer = await signIn();
      status = answer.status;
      await answer.arrayBuffer();
      return status !== 429;
    });
    assert.equal(status, 200, "the correct sign-in is served once the slow ones have ended");
  } finally {
    for (const signIn of slow) signIn.leave();
  }
});
