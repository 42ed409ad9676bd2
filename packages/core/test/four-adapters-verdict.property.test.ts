/**
 * One tool set handed to the four adapters, as a property against an oracle: random argument objects,
 * hostile legal ones among them (keys `__proto__`, `constructor`, `prototype`, `toString`; 200 levels
 * of nesting; long strings; `1e308`, `-0`, `1e309` read as Infinity, `"NaN"` as a string), sent as a
 * model sends them — JSON text to the AI SDK's `generateText` (its mock model) and to the OpenAI
 * helpers, parsed arguments to LangChain's tool call and to an MCP client of the served set:
 *
 * - the call is accepted iff the tool's zod schema, applied directly (`safeParse`), accepts the
 *   arguments;
 * - the handler sees exactly what `safeParse` answers;
 * - a refusal is an `invalid_input` error as data, never a throw out of the adapter.
 *
 * One exception, the AI SDK's own: `generateText` parses the model's text with secure-json-parse, which
 * refuses a `__proto__` key anywhere (and a `constructor` holding `prototype`) before any tool is
 * called, and answers the model an `InvalidToolInputError` as data, whatever the schema says.
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the number of argument objects (default 500); `TACKLE_PROPERTY_SEED`
 * replays one. Randomness is `seededRandom` (mulberry32) of `@tackle/test-support`.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { AIMessage, ToolMessage } from "@langchain/core/messages";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { seededRandom } from "@tackle/test-support";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { toAiSdkTools } from "../src/ai-sdk/index.ts";
import { createToolSet, defineTool } from "../src/index.ts";
import { toLangChainTools } from "../src/langchain/index.ts";
import { serveMcpStdio } from "../src/mcp/index.ts";
import { runChatToolCalls } from "../src/openai/index.ts";
import { textStep, toolCallsStep } from "./support/mock-model-steps.ts";

const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 500);
const seeds =
  process.env.TACKLE_PROPERTY_SEED === undefined
    ? Array.from({ length: rounds }, (_, index) => 4_000 + index)
    : [Number(process.env.TACKLE_PROPERTY_SEED)];

type Random = () => number;

const below = (random: Random, count: number) => Math.floor(random() * count);
const pick = <T>(random: Random, list: readonly T[]): T => list[below(random, list.length)] as T;

/** What each handler was given, by call id. */
const seen = new Map<string, unknown>();
const record = (input: unknown, context: { callId: string }) => {
  seen.set(context.callId, input);
  return { saved: true };
};
const schemas = {
  "profile.save": z.object({
    name: z.string().max(20_000),
    count: z.number().optional(),
    tags: z.array(z.string()).optional(),
    meta: z.record(z.string(), z.unknown()).optional(),
    tree: z.unknown().optional(),
  }),
  "strict.save": z.strictObject({ title: z.string(), n: z.number() }),
  "loose.save": z.looseObject({ id: z.string(), nested: z.object({ toString: z.string() }).optional() }),
} as const;
type ToolName = keyof typeof schemas;
const names = Object.keys(schemas) as ToolName[];
const toolset = createToolSet([
  defineTool({
    name: "profile.save",
    description: "Saves a profile.",
    input: schemas["profile.save"],
    execute: record,
  }),
  defineTool({
    name: "strict.save",
    description: "Saves strictly.",
    input: schemas["strict.save"],
    execute: record,
  }),
  defineTool({
    name: "loose.save",
    description: "Saves loosely.",
    input: schemas["loose.save"],
    execute: record,
  }),
]);

const hostileKeys = ["__proto__", "constructor", "prototype", "toString", "hasOwnProperty", "valueOf"];
const ownKeys = ["name", "count", "tags", "meta", "tree", "title", "n", "id", "nested"];
const numbers = ["0", "-0", "1e308", "-1e308", "1e309", "5e-324", "42", "-7.5", "9007199254740993"];

/** A random JSON value as text (keys may repeat, be `__proto__`, …), `depth` levels deep at most. */
function jsonValue(random: Random, depth: number): string {
  const kind = depth <= 0 ? below(random, 4) : below(random, 7);
  if (kind === 0)
    return JSON.stringify(
      pick(random, [
        "",
        "NaN",
        "Infinity",
        "x".repeat(below(random, 3) === 0 ? 30_000 : 8),
        "😀\u0000\u2028",
      ]),
    );
  if (kind === 1) return pick(random, numbers);
  if (kind === 2) return pick(random, ["true", "false", "null"]);
  if (kind === 3) return JSON.stringify(pick(random, hostileKeys));
  if (kind === 4)
    return `[${Array.from({ length: below(random, 4) }, () => jsonValue(random, depth - 1)).join(",")}]`;
  return jsonObject(random, depth - 1, [...hostileKeys, ...ownKeys]);
}

function jsonObject(random: Random, depth: number, keys: readonly string[]): string {
  const members = Array.from(
    { length: below(random, 5) },
    () => `${JSON.stringify(pick(random, keys))}:${jsonValue(random, depth)}`,
  );
  return `{${members.join(",")}}`;
}

function deepValue(random: Random, levels: number): string {
  let text = jsonValue(random, 0);
  for (let level = 0; level < levels; level++) {
    text = random() < 0.5 ? `[${text}]` : `{${JSON.stringify(pick(random, [...hostileKeys, "a"]))}:${text}}`;
  }
  return text;
}

/** Arguments for `tool` as a model writes them: often what its schema wants, often not quite. */
function argumentsFor(random: Random, tool: ToolName): string {
  const members: string[] = [];
  const member = (key: string, value: string) => members.push(`${JSON.stringify(key)}:${value}`);
  const string = () =>
    JSON.stringify(pick(random, ["Ada", "", "x".repeat(19_999), "x".repeat(20_001), "😀"]));
  if (tool === "profile.save") {
    if (random() < 0.9) member("name", random() < 0.85 ? string() : jsonValue(random, 1));
    if (random() < 0.5) member("count", random() < 0.8 ? pick(random, numbers) : '"NaN"');
    if (random() < 0.4)
      member(
        "tags",
        `[${Array.from({ length: below(random, 4) }, () => (random() < 0.9 ? string() : jsonValue(random, 0))).join(",")}]`,
      );
    if (random() < 0.4) member("meta", jsonObject(random, 2, hostileKeys));
    if (random() < 0.3) member("tree", deepValue(random, pick(random, [1, 20, 200])));
  } else if (tool === "strict.save") {
    if (random() < 0.9) member("title", string());
    if (random() < 0.9) member("n", pick(random, numbers));
  } else {
    if (random() < 0.9) member("id", string());
    if (random() < 0.4)
      member("nested", random() < 0.6 ? `{"toString":${string()}}` : jsonObject(random, 1, hostileKeys));
  }
  for (let extra = below(random, 3); extra > 0; extra--)
    member(pick(random, hostileKeys), jsonValue(random, 2));
  // Shuffled, so a hostile key comes before or after the tool's own.
  for (let index = members.length - 1; index > 0; index--) {
    const other = below(random, index + 1);
    [members[index], members[other]] = [members[other] as string, members[index] as string];
  }
  return `{${members.join(",")}}`;
}

interface Verdict {
  readonly accepted: boolean;
  /** The handler's input when accepted; the error code when refused. */
  readonly detail: unknown;
}

let mcpClient: Client;
let closeServed: () => Promise<void>;
before(async () => {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const served = serveMcpStdio(toolset, { transport: serverSide });
  closeServed = () => served.close();
  mcpClient = new Client(
    { name: "test", version: "0.1.0" },
    { versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  await mcpClient.connect(clientSide);
});
after(async () => {
  await mcpClient.close();
  await closeServed();
});

/** A refusal's code, for messages (an accepted call's input may have a prototype without `toString`). */
function codeOf(verdict: Verdict): string {
  return verdict.accepted ? "accepted" : String(verdict.detail);
}

/** What the handler saw for `callId`, or the code of the error answered instead. */
function verdictOf(callId: string, errorCode: unknown): Verdict {
  if (seen.has(callId)) return { accepted: true, detail: seen.get(callId) };
  return { accepted: false, detail: errorCode };
}

async function throughAiSdk(tool: ToolName, argumentText: string, callId: string): Promise<Verdict> {
  const model = new MockLanguageModelV4({
    doGenerate: [toolCallsStep([callId, toolset.llmName(tool), argumentText]), textStep("done")],
  });
  const answer = await generateText({
    model,
    tools: toAiSdkTools(toolset),
    prompt: "Save it.",
    stopWhen: stepCountIs(2),
  });
  const output = answer.steps[0]?.toolResults[0]?.output as { error?: { code?: unknown } } | undefined;
  const toolError = answer.steps[0]?.content.find((part) => part.type === "tool-error");
  return verdictOf(
    callId,
    output?.error?.code ?? (toolError === undefined ? undefined : `ai-sdk: ${String(toolError.error)}`),
  );
}

async function throughOpenAI(tool: ToolName, argumentText: string, callId: string): Promise<Verdict> {
  const [message] = await runChatToolCalls(toolset, {
    tool_calls: [
      { id: callId, type: "function", function: { name: toolset.llmName(tool), arguments: argumentText } },
    ],
  });
  const content = JSON.parse(String(message?.content)) as { error?: { code?: unknown } };
  return verdictOf(callId, content.error?.code);
}

async function throughLangChain(tool: ToolName, argumentText: string, callId: string): Promise<Verdict> {
  const langChainTool = toLangChainTools(toolset).find((each) => each.name === toolset.llmName(tool));
  const call = new AIMessage({
    content: "",
    tool_calls: [
      { type: "tool_call", id: callId, name: toolset.llmName(tool), args: JSON.parse(argumentText) },
    ],
  }).tool_calls?.[0];
  assert.ok(langChainTool !== undefined && call !== undefined);
  const message = await langChainTool.invoke(call);
  assert.ok(message instanceof ToolMessage);
  const content = JSON.parse(String(message.content)) as { error?: { code?: unknown } };
  return verdictOf(callId, message.status === "error" ? content.error?.code : undefined);
}

async function throughMcp(tool: ToolName, argumentText: string, callId: string): Promise<Verdict> {
  const before = new Set(seen.keys());
  const answer = await mcpClient.callTool({ name: tool, arguments: JSON.parse(argumentText) });
  // The server names the call itself: the handler's input is the one call seen since.
  const handled = [...seen.keys()].filter((id) => !before.has(id));
  assert.ok(handled.length <= 1);
  if (handled[0] !== undefined) {
    seen.set(callId, seen.get(handled[0]));
    seen.delete(handled[0]);
  }
  const error = (answer.structuredContent as { error?: { code?: unknown } } | undefined)?.error;
  return verdictOf(callId, answer.isError === true ? (error?.code ?? "error without a code") : undefined);
}

/**
 * Whether the AI SDK's JSON parse (secure-json-parse) refuses the text: it holds a `__proto__` key, or
 * a `constructor` key whose value holds a `prototype` key. `generateText` answers the model with an
 * `InvalidToolInputError` then, as data, and the tool is not called.
 */
function aiSdkRefusesJson(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return false;
  if (Array.isArray(value)) return value.some(aiSdkRefusesJson);
  const keys = Object.keys(value);
  if (keys.includes("__proto__")) return true;
  const made = (value as Record<string, unknown>).constructor;
  if (keys.includes("constructor") && typeof made === "object" && made !== null) {
    if (Object.keys(made).includes("prototype")) return true;
  }
  return keys.some((key) => aiSdkRefusesJson((value as Record<string, unknown>)[key]));
}

const adapters = { aiSdk: throughAiSdk, openAI: throughOpenAI, langChain: throughLangChain, mcp: throughMcp };

test(`${seeds.length} random argument objects: each adapter accepts iff the tool's schema does, and hands the handler what it parsed`, async () => {
  let accepted = 0;
  for (const seed of seeds) {
    const random = seededRandom(seed);
    const tool = pick(random, names);
    const argumentText = argumentsFor(random, tool);
    const expected = schemas[tool].safeParse(JSON.parse(argumentText));
    if (expected.success) accepted += 1;
    for (const [adapter, run] of Object.entries(adapters)) {
      const callId = `${adapter}-${seed}`;
      const where = `seed ${seed} (TACKLE_PROPERTY_SEED=${seed} replays it), ${adapter}, ${tool} ${argumentText.slice(0, 300)}`;
      let verdict: Verdict;
      try {
        verdict = await run(tool, argumentText, callId);
      } catch (error) {
        assert.fail(`${where}: threw ${(error as Error).stack}`);
      }
      if (adapter === "aiSdk" && aiSdkRefusesJson(JSON.parse(argumentText))) {
        // The AI SDK parses the model's text itself, refusing these keys before any tool sees it.
        assert.equal(verdict.accepted, false, `${where}: the AI SDK let a __proto__ key through`);
        assert.match(codeOf(verdict), /AI_InvalidToolInputError/, where);
      } else if (expected.success) {
        assert.equal(
          verdict.accepted,
          true,
          `${where}: refused (${codeOf(verdict)}) what the schema accepts`,
        );
        assert.deepStrictEqual(verdict.detail, expected.data, `${where}: the handler saw another value`);
      } else {
        assert.equal(verdict.accepted, false, `${where}: accepted what the schema refuses`);
        assert.equal(verdict.detail, "invalid_input", `${where}: refused as ${codeOf(verdict)}`);
      }
      seen.delete(callId);
    }
  }
  process.stdout.write(`# ${seeds.length} argument objects, ${accepted} accepted by the schema\n`);
});

test("over MCP a top-level __proto__ key reaches the tool's schema as sent: a strict one refuses it", async () => {
  const strict = await throughMcp("strict.save", '{"__proto__":{"n":1},"title":"t","n":2}', "mcp-strict");
  assert.deepEqual(strict, { accepted: false, detail: "invalid_input" });
  const loose = await throughMcp("loose.save", '{"id":"a","__proto__":5}', "mcp-loose");
  assert.equal(loose.accepted, true);
  assert.deepStrictEqual(loose.detail, schemas["loose.save"].parse(JSON.parse('{"id":"a","__proto__":5}')));
});
