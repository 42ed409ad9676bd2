/**
 * A schema that throws instead of answering — a recursive schema walking arguments nested past the
 * stack, a transform or refine that throws — is a coded error from `call`, never an exception out of
 * it: an adapter answering a model's turn would lose every other call of the turn with it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { runChatToolCalls } from "../openai/run-chat-tool-calls.ts";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "./create-tool-set.ts";

type Tree = { children: Tree[] };
const tree: z.ZodType<Tree> = z.lazy(() => z.object({ children: z.array(tree) }));

/** A tree `depth` levels deep: legal JSON a caller can send in well under a megabyte. */
function deepTree(depth: number): Tree {
  let node: Tree = { children: [] };
  for (let level = 0; level < depth; level += 1) node = { children: [node] };
  return node;
}

const tools = createToolSet([
  defineTool({ name: "tree.size", description: "Counts.", input: z.object({ tree }), execute: () => 1 }),
  defineTool({
    name: "json.read",
    description: "Parses in its schema.",
    input: z.object({ text: z.string().transform((text) => JSON.parse(text) as unknown) }),
    execute: ({ text }) => text,
  }),
  defineTool({
    name: "tree.grow",
    description: "Answers a tree its output schema walks.",
    input: z.object({ depth: z.number() }),
    output: tree,
    execute: ({ depth }) => deepTree(depth),
  }),
  defineTool({
    name: "check.async",
    description: "An async refine that rejects.",
    input: z.object({ id: z.string() }).refine(async () => {
      throw new Error("lookup down");
    }),
    execute: () => "never",
  }),
  defineTool({ name: "ping", description: "Fine.", input: z.object({}), execute: () => "pong" }),
]);

describe("createToolSet: a schema that throws", () => {
  it("refuses arguments nested past the stack as invalid_input", async () => {
    const result = await tools.call("tree.size", { tree: deepTree(100_000) });
    assert.equal(result.ok, false);
    assert.equal(!result.ok && result.error.code, "invalid_input");
    assert.match(!result.ok ? result.error.message : "", /nest too deeply/);
    assert.equal((await tools.call("tree.size", { tree: deepTree(20) })).ok, true);
  });

  it("answers a transform or an async refine that throws as tool_failed", async () => {
    const parsed = await tools.call("json.read", { text: "{not json" });
    assert.equal(!parsed.ok && parsed.error.code, "tool_failed");
    const refined = await tools.call("check.async", { id: "a" });
    assert.equal(!refined.ok && refined.error.code, "tool_failed");
    assert.match(!refined.ok ? refined.error.message : "", /lookup down/);
  });

  it("refuses an output nested past the stack as invalid_output", async () => {
    const result = await tools.call("tree.grow", { depth: 100_000 });
    assert.equal(!result.ok && result.error.code, "invalid_output");
    assert.equal((await tools.call("tree.grow", { depth: 3 })).ok, true);
  });

  it("leaves the other calls of a model's turn answered", async () => {
    // As a model's argument text arrives: 100,000 levels in 1.5 MB of JSON.
    const deep = `{"tree":${'{"children":['.repeat(100_000)}{"children":[]}${"]}".repeat(100_000)}}`;
    const argumentsOf = [deep, JSON.stringify({ text: "{" }), "{}"];
    const answers = await runChatToolCalls(tools, {
      tool_calls: ["tree__size", "json__read", "ping"].map((name, index) => ({
        id: `call_${index}`,
        type: "function" as const,
        function: { name, arguments: argumentsOf[index]! },
      })),
    });
    const [size, read, ping] = answers.map((answer) => String(answer.content));
    assert.equal(JSON.parse(size!).error.code, "invalid_input");
    assert.equal(JSON.parse(read!).error.code, "tool_failed");
    assert.equal(ping, "pong");
  });
});
