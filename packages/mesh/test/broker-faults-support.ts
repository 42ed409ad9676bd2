/**
 * The pieces of `broker-faults.property.test.ts`: a round's broker faults, drawn up front, and the
 * judge of the errors a call caught by one may answer (the mesh's documented codes, each where it fits).
 */
import assert from "node:assert/strict";
import { type AnsweredCall, type Counts, checkError, type ErrorJudge } from "./keyed-calls-support.ts";

/** Which relay a fault hits: the nodes' (their service, their ledger) or the clients'. */
export type Side = "nodes" | "clients";

export type Fault =
  /** Drops every connection through the relay; the parties reconnect at once. */
  | { readonly kind: "cut"; readonly side: Side; readonly atMs: number }
  /**
   * Loses the answer to the next chunk a party sends that matches `pattern` (its request went
   * through: the broker took the publish, the party hears a reset).
   */
  | { readonly kind: "lose"; readonly side: Side; readonly atMs: number; readonly pattern: string }
  /** Drops every connection and refuses new ones for `forMs`. */
  | { readonly kind: "down"; readonly side: Side; readonly atMs: number; readonly forMs: number }
  /** Stops the nats-server (SIGKILL or SIGTERM) and starts it again on its port and store after `forMs`. */
  | { readonly kind: "restart"; readonly atMs: number; readonly forMs: number; readonly kill: boolean };

/**
 * What each party sends that a lost answer may follow, as NATS protocol text (latin1). The results
 * bucket's writes are publishes to `$KV.<bucket>.<key>`: a claim carries a `running` record, a key's
 * end a `done` one, a release is a `KV-Operation: DEL`; its reads are JetStream API requests; a node's
 * reply goes to the caller's `_INBOX.`; a call is an `HPUB` to the module's subject; `connect` is a
 * reconnect's handshake (the relay is cut as it is armed: the first party back loses the broker's
 * answer to its CONNECT); `any` is the next chunk whatever it is.
 */
const bucket = String.raw`\$KV\.tackle-mesh-results-effects\.`;
export const patterns: Readonly<Record<Side, Readonly<Record<string, RegExp>>>> = {
  nodes: {
    claim: new RegExp(String.raw`${bucket}[\s\S]*"state":"running"`),
    record: new RegExp(String.raw`${bucket}[\s\S]*"state":"done"`),
    release: new RegExp(String.raw`${bucket}[\s\S]*KV-Operation: ?DEL`),
    "kv-read": /PUB \$JS\.API\.[A-Z.]*GET\.KV_tackle-mesh-results-effects/,
    reply: /PUB _INBOX\./,
    connect: /^CONNECT /m,
    any: /[\s\S]/,
  },
  clients: {
    call: /^HPUB (?!_INBOX|\$)/m,
    connect: /^CONNECT /m,
    any: /[\s\S]/,
  },
};

/**
 * 1–3 faults at random moments of the first 150 ms (a lost answer armed in the first 40, while the
 * round's calls write); in about one round in six the broker restarts too.
 */
export function planFaults(random: () => number): Fault[] {
  const pick = (n: number) => Math.floor(random() * n);
  const faults = Array.from({ length: 1 + pick(3) }, (): Fault => {
    const side: Side = random() < 0.6 ? "nodes" : "clients";
    const atMs = pick(151);
    const roll = random();
    if (roll < 0.3) return { kind: "cut", side, atMs };
    if (roll < 0.8) {
      // A claim is the write whose lost answer a key depends on most: drawn three times as often.
      const names = [...Object.keys(patterns[side]), ...(side === "nodes" ? ["claim", "claim"] : [])];
      return { kind: "lose", side, atMs: atMs % 41, pattern: names[pick(names.length)] as string };
    }
    return { kind: "down", side, atMs, forMs: 50 + pick(551) };
  });
  if (random() < 0.17)
    faults.push({ kind: "restart", atMs: pick(151), forMs: pick(501), kill: random() < 0.5 });
  return faults;
}

/** The codes a call caught by a broker fault may answer, besides the ones `checkError` allows. */
const faultCodes = new Set([
  // Not sent (the connection was down), or its results ledger could not be reached: it did not run.
  "unavailable",
  // Lost inside the broker (the node disowned it): it did not run.
  "not_delivered",
  // It ran; its reply was lost.
  "reply_lost",
  // The broker stayed unreachable to its deadline: it may or may not have run.
  "disconnected",
  // The node holding it was not heard from (its connection dropped) past the node watch's bound.
  "node_lost",
  // Nothing served the module for a moment (the nodes reconnecting, a restarted broker).
  "unreachable",
  "no_responders",
]);

/** Whether an answer says the call did not run, so none of its effect may ever land. */
export function saysNotRun(call: AnsweredCall): boolean {
  return !call.answer.ok && call.answer.error.code === "not_delivered";
}

/**
 * The errors under broker faults: a fault's code (a `not_delivered` retryable, a `reply_lost` not) or
 * one `checkError` allows where it fits — the fixture's own `unavailable` to the failing arguments,
 * `timeout` only to a call with a short limit (a wedged key would answer the others `timeout` at their
 * 10 s limit), `aborted` only to a call its caller aborted. Counts each fault code in `byCode`.
 */
export function faultJudge(byCode: Map<string, number>): ErrorJudge {
  return (call: AnsweredCall, variants, describe: string, counts: Counts) => {
    const { answer } = call;
    if (answer.ok) return;
    const { code, message } = answer.error;
    const fixtureFailure = call.variant === "F" && /asked to fail/.test(message);
    if (!fixtureFailure && faultCodes.has(code)) {
      const why = `${describe}: ${JSON.stringify({ call: { ...call, answer: undefined }, answer })}`;
      if (code === "not_delivered") assert.equal(answer.error.retryable, true, why);
      if (code === "reply_lost") assert.equal(answer.error.retryable, false, why);
      byCode.set(code, (byCode.get(code) ?? 0) + 1);
      return;
    }
    checkError(call, variants, describe, counts);
  };
}
