/** The mesh client's request/reply against a real nats-server: replies, time limits by lane, cancels. */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  connect,
  headers,
  type NatsConnection,
  NoRespondersError,
  TimeoutError,
} from "@nats-io/transport-node";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import { createRequester } from "./request-reply.ts";

let nats: NatsServerHandle;
let server: NatsConnection;
let client: NatsConnection;

before(async () => {
  nats = await startNatsServer();
  server = await connect({ servers: nats.url });
  client = await connect({ servers: nats.url, noAsyncTraces: true });
  // Answers after the delay its body names; "never" is never answered.
  server.subscribe("slow.>", {
    callback: (error, message) => {
      if (error !== null) return;
      const ms = Number(new TextDecoder().decode(message.data));
      setTimeout(() => message.respond(`done ${ms}`), ms);
    },
  });
  server.subscribe("never", { callback: () => {} });
  await server.flush();
});
after(async () => {
  await client.close();
  await server.close();
  await nats.close();
});

const body = (text: string) => new TextEncoder().encode(text);

test("requests of two time limits time out each at its own deadline, and the answered ones are answered", async () => {
  const requester = createRequester(client);
  try {
    const started = performance.now();
    const at = async (reply: Promise<unknown>) => {
      const value = await reply;
      return { value, after: performance.now() - started };
    };
    const short = requester.start("never", body(""), headers(), 150);
    const long = requester.start("never", body(""), headers(), 450);
    const answered = requester.start("slow.a", body("50"), headers(), 450);
    const secondShort = requester.start("never", body(""), headers(), 150);
    const results = await Promise.all([short, long, answered, secondShort].map(({ reply }) => at(reply)));
    const [first, second, third, fourth] = results;
    assert.ok(first?.value instanceof TimeoutError && fourth?.value instanceof TimeoutError);
    assert.ok(second?.value instanceof TimeoutError);
    assert.ok((first?.after ?? 0) >= 145 && (first?.after ?? 0) < 400, `short after ${first?.after} ms`);
    assert.ok((second?.after ?? 0) >= 445, `long after ${second?.after} ms`);
    const message = third?.value as { data: Uint8Array };
    assert.equal(new TextDecoder().decode(message.data), "done 50");
  } finally {
    requester.close();
  }
});

test("a request settled early (a cancel) stays settled: its reply and its deadline change nothing", async () => {
  const requester = createRequester(client);
  try {
    // Limits of seconds, so a loaded machine's lag cannot time out the calls that must be answered.
    const limitMs = 4000;
    const { token, reply } = requester.start("slow.b", body("100"), headers(), limitMs);
    requester.settle(token, new Error("cancelled"));
    assert.equal(((await reply) as Error).message, "cancelled");
    await new Promise((resolve) => setTimeout(resolve, limitMs / 2));
    // Calls of the same limit, answered after the cancelled one's deadline and well before their own:
    // a lane armed for the cancelled call would time them out when its deadline passed.
    const replies = await Promise.all(
      Array.from(
        { length: 50 },
        (_, index) => requester.start(`slow.${index}`, body(String(limitMs * 0.7)), headers(), limitMs).reply,
      ),
    );
    assert.deepEqual(
      replies.filter((value) => value instanceof Error).map((value) => (value as Error).name),
      [],
    );
  } finally {
    requester.close();
  }
});

test("nothing subscribed: no responders, at once", async () => {
  const requester = createRequester(client);
  try {
    const started = performance.now();
    const value = await requester.start("nobody.here", body(""), headers(), 5000).reply;
    assert.ok(value instanceof NoRespondersError);
    assert.ok(performance.now() - started < 2000);
  } finally {
    requester.close();
  }
});
