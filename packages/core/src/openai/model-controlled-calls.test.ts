import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ChatCompletionMessageToolCall } from "openai/resources/chat/completions/completions";
import type { ResponseOutputItem } from "openai/resources/responses/responses";
import { z } from "zod";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "../tool-set/create-tool-set.ts";
import { runChatToolCalls } from "./run-chat-tool-calls.ts";
import { runResponseToolCalls } from "./run-response-tool-calls.ts";

// What a model controls in a turn (ADR 0546): how many calls, their names, ids and argument text.

let running = 0;
let peak = 0;
const slow = defineTool({
  name: "slow.echo",
  description: "Echoes after a moment.",
  input: z.object({ n: z.number() }),
  execute: async ({ n }) => {
    running += 1;
    peak = Math.max(peak, running);
    await new Promise((resolve) => setTimeout(resolve, 1));
    running -= 1;
    return { n };
  },
});
const toolset = createToolSet([slow]);

function chatCall(id: string, name: string, args: string): ChatCompletionMessageToolCall {
  return { id, type: "function", function: { name, arguments: args } };
}

describe("OpenAI helpers: what a model's turn costs and answers", () => {
  it("runs 10,000 calls of one message at most 64 at once, every answer in order", async () => {
    peak = 0;
    const calls = Array.from({ length: 10_000 }, (_, n) => chatCall(`c${n}`, "slow__echo", `{"n":${n}}`));
    const answers = await runChatToolCalls(toolset, { tool_calls: calls });
    assert.equal(answers.length, 10_000);
    answers.forEach((answer, n) => {
      assert.equal(answer.tool_call_id, `c${n}`);
      assert.deepEqual(JSON.parse(String(answer.content)), { n });
    });
    assert.ok(peak <= 64, `at most 64 at once, saw ${peak}`);
    assert.ok(peak > 1, "still concurrent");
  });

  it("takes maxConcurrentCalls for a response's function calls, and refuses a bound that is not one", async () => {
    peak = 0;
    const items = Array.from(
      { length: 200 },
      (_, n) =>
        ({
          type: "function_call",
          call_id: `r${n}`,
          name: "slow__echo",
          arguments: `{"n":${n}}`,
        }) as ResponseOutputItem,
    );
    const answers = await runResponseToolCalls(toolset, items, { maxConcurrentCalls: 3 });
    assert.deepEqual(
      answers.map((answer) => answer.call_id),
      items.map((_, n) => `r${n}`),
    );
    assert.equal(peak, 3);
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      await assert.rejects(runResponseToolCalls(toolset, items, { maxConcurrentCalls: bad }), {
        code: "invalid_max_concurrent_calls",
      });
    }
  });

  it("answers inherited names, prototype keys, line breaks in ids and 100,000-deep arguments as data", async () => {
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    const answers = await runChatToolCalls(toolset, {
      tool_calls: [
        chatCall("a", "constructor", "{}"),
        chatCall("b", "__proto__", "{}"),
        chatCall("c", "toString", "{}"),
        chatCall("d", "slow__echo", '{"__proto__":{"n":1},"n":2}'),
        chatCall("e\r\nX-Injected: 1", "slow__echo", '{"n":3}'),
        chatCall("f", "slow__echo", deep),
        chatCall("g", "tackle_result_page", '{"cursor":"__proto__"}'),
      ],
    });
    const read = answers.map((answer) => JSON.parse(String(answer.content)));
    for (const index of [0, 1, 2]) assert.equal(read[index].error.code, "unknown_tool");
    assert.deepEqual(read[3], { n: 2 });
    assert.equal(answers[4]?.tool_call_id, "e\r\nX-Injected: 1");
    assert.deepEqual(read[4], { n: 3 });
    assert.equal(read[5].error.code, "invalid_input");
    assert.equal(read[6].error.code, "not_found");
  });
});
