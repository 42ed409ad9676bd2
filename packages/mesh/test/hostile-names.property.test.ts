/**
 * Random calls with hostile names against a node on a real nats-server (ADR 0218), each checked against
 * an oracle of what it must answer: module, tool, seat and verb names drawn from what a plain object
 * inherits (`__proto__`, `constructor`, `toString`, …), subject metacharacters (`*`, `>`, `.`, spaces,
 * line breaks), unicode and long strings, beside the real ones; arguments with inherited keys and deep
 * nesting; idempotency keys and call ids from the same pool, keys repeated with the same or other
 * arguments. A call answers the tool it names or the typed error the oracle says, never another
 * tool's answer, a throw or a hang.
 *
 * By default it runs as many cases as fit in about 25 s; `TACKLE_PROPERTY_ROUNDS` sets the number of
 * cases instead, from seed `TACKLE_PROPERTY_SEED` (default 218). The counts are printed.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import type { ToolCallResult } from "@tackle/core";
import { type NatsServerHandle, seededRandom, startNatsServer } from "@tackle/test-support";
import { moduleNamePattern, toolNameProblem, toolSubjectPattern } from "../src/config/names.ts";
import { createMeshClient, issueMembership, type MeshClient, startNodeRuntime } from "../src/index.ts";
import { seatNamePattern } from "../src/membership/records.ts";
import { canonicalJson } from "../src/runtime/canonical-json.ts";
import { eventually, fixture, meshConfig } from "./helpers.ts";

const roundsGiven = process.env.TACKLE_PROPERTY_ROUNDS;
const cases = roundsGiven === undefined ? Number.POSITIVE_INFINITY : Number(roundsGiven);
const budgetMs = roundsGiven === undefined ? 25_000 : Number.POSITIVE_INFINITY;
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 218);
/** Cases in flight at once. */
const batch = 8;

const served = ["names", "__proto__"];
const tools = ["echo", "count", "fail", "wait", "pad.note", "constructor", "__proto__", "toString"];
const inherited = [
  "__proto__",
  "constructor",
  "toString",
  "hasOwnProperty",
  "valueOf",
  "isPrototypeOf",
  "propertyIsEnumerable",
  "toLocaleString",
  "__defineGetter__",
  "__lookupSetter__",
];
const metacharacters = [
  ...["*", ">", "a.*", "echo.>", "a b", "\t", "echo\r\nPUB x 1", "", ".", "..", "a..b", "echo."],
  ...["$SRV", "_INBOX.x", "tools", "tools.held", "tools.cancel", "tools.alive.x", "tools.events.x"],
];
const unicode = ["é", "名前", "😀", "\u2028", "\u0000", "\ud800", "ﬀ", "echo\u200b"];

/** The codes the mesh and core answer with; any other comes from the fixture's `fail`. */
const meshCodes = new Set([
  ...["invalid_request", "invalid_input", "unknown_tool", "unknown_seat", "unreachable"],
  "idempotency_key_reused",
]);

type Random = () => number;

const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;

function longName(random: Random): string {
  const alphabet = "abcXYZ019_-.";
  const length = pick(random, [64, 65, 128, 129, 500, 2000]);
  return Array.from({ length }, () => pick(random, [...alphabet])).join("");
}

/** A name from every pool: real ones, inherited ones, metacharacters, unicode, long strings. */
function randomName(random: Random, real: readonly string[]): string {
  const pool = random();
  if (pool < 0.35) return pick(random, real);
  if (pool < 0.6) return pick(random, inherited);
  if (pool < 0.8) return pick(random, metacharacters);
  if (pool < 0.9) return pick(random, unicode);
  return longName(random);
}

/** An object with `name` as an own property, even `__proto__` (an assignment would set the prototype). */
function own(object: Record<string, unknown>, name: string, value: unknown): Record<string, unknown> {
  Object.defineProperty(object, name, { value, enumerable: true, writable: true, configurable: true });
  return object;
}

function randomValue(random: Random, depth: number): unknown {
  const kind = random();
  if (depth > 3 || kind < 0.4) return pick(random, [0, -1.5, "x", "", "😀", true, null, 1e21]);
  if (kind < 0.55)
    return Array.from({ length: Math.floor(random() * 3) }, () => randomValue(random, depth + 1));
  const object: Record<string, unknown> = {};
  for (let index = Math.floor(random() * 4); index > 0; index -= 1)
    own(object, randomName(random, ["text", "code", "ms", "a"]), randomValue(random, depth + 1));
  return object;
}

/** Arguments for `tool`: mostly right, often with inherited keys beside, sometimes wrong or deep. */
function randomArgs(random: Random, tool: string): unknown {
  const kind = random();
  if (kind < 0.1) {
    const levels = pick(random, [100, 1000, 2000]);
    return JSON.parse(`${'{"a":['.repeat(levels)}1${"]}".repeat(levels)}`);
  }
  if (kind < 0.3) return randomValue(random, 0);
  const args = randomValue(random, 3);
  const base: Record<string, unknown> =
    typeof args === "object" && args !== null && !Array.isArray(args) ? { ...args } : {};
  if (tool === "echo") own(base, "text", random() < 0.9 ? randomName(random, ["hello"]) : 5);
  if (tool === "fail") own(base, "code", randomName(random, ["teapot", "not_found"]));
  if (tool === "wait") own(base, "ms", random() < 0.9 ? Math.floor(random() * 15) : -1);
  return base;
}

/** What the node does with arguments: they cross as JSON, and no body (or null) is `{}`. */
function asReceived(args: unknown): unknown {
  return JSON.parse(JSON.stringify(args ?? {})) ?? {};
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The fixture's `count`, for the oracle. */
function counted(value: unknown): { tool: string; depth: number; keys: number } {
  let depth = 0;
  let keys = 0;
  let at = value;
  while (typeof at === "object" && at !== null) {
    depth += 1;
    const names = Object.keys(at);
    keys += names.length;
    at = names.length === 0 ? undefined : (at as Record<string, unknown>)[names[0] as string];
  }
  return { tool: "count", depth, keys };
}

/** What a call of the fixture's `tool` with these arguments answers: its output, or an error code. */
function toolAnswer(
  tool: string,
  args: unknown,
): { ok: true; output: unknown } | { ok: false; code: string } {
  const received = asReceived(args);
  const invalid = { ok: false as const, code: "invalid_input" };
  if (tool === "count") return { ok: true, output: counted(received) };
  if (!isObject(received)) return invalid;
  const field = (name: string) => (Object.hasOwn(received, name) ? received[name] : undefined);
  if (tool === "echo") {
    const text = field("text");
    return typeof text === "string" ? { ok: true, output: { tool, text } } : invalid;
  }
  if (tool === "fail") {
    const code = field("code");
    return typeof code === "string" ? { ok: false, code } : invalid;
  }
  if (tool === "wait") {
    const ms = field("ms");
    return typeof ms === "number" && Number.isInteger(ms) && ms >= 0 && ms <= 60_000
      ? { ok: true, output: { tool, ms } }
      : invalid;
  }
  return { ok: true, output: { tool } };
}

type Expected = { ok: true; output: unknown } | { ok: false; code: string };

/** One case: what is called, and what it must answer. */
interface Case {
  readonly describe: string;
  readonly run: (client: MeshClient) => Promise<ToolCallResult>;
  readonly expected: Expected;
  /** A keyed call of a real tool: recorded, so a later case may repeat its key. */
  readonly keyed?: { readonly id: string; readonly args: string; readonly value: unknown };
}

/** The keys used so far, by module, tool and key: their arguments' fingerprint and their outcome. */
type Keys = Map<
  string,
  {
    readonly module: string;
    readonly tool: string;
    readonly key: string;
    readonly args: string;
    readonly expected: Expected;
    readonly value: unknown;
  }
>;

/** A key or call id the client refuses before sending: a line break, or over 1,024 characters (ADR 0224). */
const unsendableKey = (value: string | undefined) =>
  value !== undefined && (/[\r\n]/.test(value) || value.length > 1024);

function randomCase(random: Random, index: number, keys: Keys): Case {
  const seat = random() < 0.25;
  const first = seat
    ? randomName(random, ["pad"])
    : random() < 0.85
      ? pick(random, served)
      : randomName(random, served);
  const second = seat ? randomName(random, ["note"]) : randomName(random, tools);
  // `module.tool` splits on its first dot, wherever the name's parts had theirs.
  const name = `${first}.${second}`;
  const dot = name.indexOf(".");
  const module = seat ? "names" : name.slice(0, dot);
  const tool = seat ? name : name.slice(dot + 1);
  let args = randomArgs(random, tool);
  // An idempotency key: none, a new one, or one used before with the same or other arguments.
  let key: string | undefined;
  const keying = random();
  const used = [...keys.values()].filter((entry) => entry.module === module && entry.tool === tool);
  if (keying < 0.15 && used.length > 0) {
    const earlier = pick(random, used);
    key = earlier.key;
    if (random() < 0.6) args = earlier.value;
  } else if (keying < 0.4) key = `${randomName(random, ["k"])}#${seed}-${index}`;
  const callId = random() < 0.2 ? `${randomName(random, ["c"])}#${index}` : undefined;
  const options = {
    ...(key === undefined ? {} : { idempotencyKey: key }),
    ...(callId === undefined ? {} : { callId }),
  };
  const describe = `case ${index} (seed ${seed}): ${seat ? `callSeat(${JSON.stringify(first)}, ${JSON.stringify(second)})` : `call(${JSON.stringify(name)})`} ${JSON.stringify(options)} ${JSON.stringify(args)?.slice(0, 200)}`;
  const run = seat
    ? (client: MeshClient) => client.callSeat(first, second, args, options)
    : (client: MeshClient) => client.call(name, args, options);
  const code = (name: string): Expected => ({ ok: false, code: name });

  // The oracle, in the order the client and the node decide.
  if (seat) {
    if (!seatNamePattern.test(first) || !toolSubjectPattern.test(second))
      return { describe, run, expected: code("invalid_request") };
  } else if (dot <= 0 || !moduleNamePattern.test(module) || toolNameProblem(tool) !== undefined)
    return { describe, run, expected: code("invalid_request") };
  // A seat is looked up in the memberships before the call is sent (and its headers written).
  if (seat && first !== "pad") return { describe, run, expected: code("unknown_seat") };
  if (unsendableKey(key) || unsendableKey(callId))
    return { describe, run, expected: code("invalid_request") };
  if (!seat && !served.includes(module)) return { describe, run, expected: code("unreachable") };
  if (!tools.includes(tool) || (seat && second !== "note"))
    return { describe, run, expected: code("unknown_tool") };
  const answer = toolAnswer(tool, args);
  if (key === undefined || key === "") return { describe, run, expected: answer };
  const id = JSON.stringify([module, tool, key]);
  const fingerprint = canonicalJson(asReceived(args));
  const earlier = keys.get(id);
  if (earlier === undefined)
    return { describe, run, expected: answer, keyed: { id, args: fingerprint, value: args } };
  return {
    describe,
    run,
    expected: earlier.args === fingerprint ? earlier.expected : code("idempotency_key_reused"),
  };
}

let nats: NatsServerHandle;
let runtime: Awaited<ReturnType<typeof startNodeRuntime>>;
let client: MeshClient;
before(async () => {
  nats = await startNatsServer();
  const bundle = fixture("inherited-names.mjs");
  runtime = await startNodeRuntime({
    config: meshConfig(
      "property-1",
      nats.url,
      served.map((module) => ({ module, path: bundle })),
    ),
  });
  client = await createMeshClient({ servers: nats.url, timeoutMs: 20_000 });
  await issueMembership(client.connection, { node: "property-1", module: "names", seats: ["pad"] });
  await issueMembership(client.connection, { node: "property-1", module: "__proto__" });
  await eventually("the seat's verb answering", async () => {
    const result = await client.callSeat("pad", "note", {});
    return result.ok ? result : undefined;
  });
});
after(async () => {
  await client?.close();
  await runtime?.close();
  await nats?.close();
});

it("answers every hostile call with the tool it names or the typed error the oracle says", async () => {
  const random = seededRandom(seed);
  const keys: Keys = new Map();
  const counts = new Map<string, number>();
  const started = performance.now();
  let index = 0;
  while (index < cases && performance.now() - started < budgetMs) {
    const round: Case[] = [];
    for (let slot = 0; slot < batch && index < cases; slot += 1, index += 1)
      round.push(randomCase(random, index, keys));
    // A call that throws fails the property as surely as a wrong answer.
    const results = await Promise.all(round.map((call) => call.run(client)));
    results.forEach((result, at) => {
      const call = round[at] as Case;
      const got: Expected = result.ok
        ? { ok: true, output: result.output }
        : { ok: false, code: result.error.code };
      assert.deepEqual(
        got,
        call.expected,
        `${call.describe}\n  answered ${JSON.stringify(result).slice(0, 400)}`,
      );
      const label = got.ok ? "ok" : meshCodes.has(got.code) ? got.code : "a tool's own code";
      counts.set(label, (counts.get(label) ?? 0) + 1);
      if (call.keyed !== undefined) {
        const [module, tool, key] = JSON.parse(call.keyed.id) as [string, string, string];
        keys.set(call.keyed.id, {
          module,
          tool,
          key,
          args: call.keyed.args,
          expected: call.expected,
          value: call.keyed.value,
        });
      }
    });
  }
  const summary = [...counts].sort(([, a], [, b]) => b - a).map(([label, count]) => `${label} ${count}`);
  console.log(
    `hostile names: ${index} calls in ${Math.round(performance.now() - started)} ms (seed ${seed}): ${summary.join(", ")}`,
  );
  assert.ok(index >= Math.min(cases, 200), `only ${index} cases ran`);
});
