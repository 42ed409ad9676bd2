import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AIMessageChunk, ToolMessage } from "@langchain/core/messages";
import { convertToOpenAITool } from "@langchain/core/utils/function_calling";
import { FakeStreamingChatModel } from "@langchain/core/utils/testing";
import { z } from "zod";
import { controlFlowBrand } from "../errors/control-flow.ts";
import { withoutDialect } from "../schema/schema.ts";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "../tool-set/create-tool-set.ts";
import { toLangChainTools } from "./to-langchain-tools.ts";

const executed: string[] = [];
const lookup = defineTool({
  name: "orders.lookup",
  description: "Finds an order by id.",
  input: z.object({ id: z.number().int().positive() }),
  execute: ({ id }, context) => {
    executed.push(context.callId);
    if (id === 404) throw new Error("no such order");
    return { id, status: "shipped" };
  },
});
const [tool] = toLangChainTools(createToolSet([lookup]));
assert.ok(tool !== undefined);

describe("toLangChainTools", () => {
  it("names tools model-safely and describes them with the derived JSON Schema", () => {
    assert.equal(tool.name, "orders__lookup");
    assert.deepEqual(convertToOpenAITool(tool), {
      type: "function",
      function: {
        name: "orders__lookup",
        description: "Finds an order by id.",
        parameters: withoutDialect(lookup.inputJsonSchema),
      },
    });
  });

  it("answers a ToolCall with a ToolMessage carrying the output, under the call's id", async () => {
    executed.length = 0;
    const message = await tool.invoke({
      type: "tool_call",
      id: "call-7",
      name: "orders__lookup",
      args: { id: 7 },
    });
    assert.ok(message instanceof ToolMessage);
    assert.equal(message.tool_call_id, "call-7");
    assert.equal(message.status, "success");
    assert.deepEqual(JSON.parse(String(message.content)), { id: 7, status: "shipped" });
    assert.deepEqual(executed, ["call-7"]);
  });

  it("returns the output itself for plain arguments", async () => {
    assert.deepEqual(await tool.invoke({ id: 8 }), { id: 8, status: "shipped" });
  });

  it("answers invalid input with an error ToolMessage listing the issues", async () => {
    executed.length = 0;
    const message = await tool.invoke({
      type: "tool_call",
      id: "call-bad",
      name: "orders__lookup",
      args: { id: -1 },
    });
    assert.ok(message instanceof ToolMessage);
    assert.equal(message.status, "error");
    const { error } = JSON.parse(String(message.content));
    assert.equal(error.code, "invalid_input");
    assert.deepEqual(error.data.issues[0].path, ["id"]);
    assert.equal((message.artifact as { code: string }).code, "invalid_input");
    assert.deepEqual(executed, []);
  });

  it("answers a failing tool with an error ToolMessage, and throws for plain arguments", async () => {
    const message = await tool.invoke({
      type: "tool_call",
      id: "call-404",
      name: "orders__lookup",
      args: { id: 404 },
    });
    assert.ok(message instanceof ToolMessage);
    assert.equal(message.status, "error");
    assert.equal(JSON.parse(String(message.content)).error.code, "tool_failed");
    await assert.rejects(tool.invoke({ id: 404 }), { code: "tool_failed" });
  });

  it("runs the tool call a fake chat model makes", async () => {
    executed.length = 0;
    // LangChain's own fake chat model stands in for a hosted one; it replies with the scripted tool call.
    const model = new FakeStreamingChatModel({
      sleep: 0,
      chunks: [
        new AIMessageChunk({
          content: "",
          tool_calls: [{ type: "tool_call", id: "fake-1", name: "orders__lookup", args: { id: 3 } }],
        }),
      ],
    });
    const bound = model.bindTools([tool]);
    const offered = (bound as unknown as { config: { tools: { function: { parameters: unknown } }[] } })
      .config.tools;
    assert.deepEqual(offered[0]?.function.parameters, withoutDialect(lookup.inputJsonSchema));
    const reply = await bound.invoke("Where is order 3?");
    const toolCall = reply.tool_calls?.[0];
    assert.ok(toolCall !== undefined);
    const byName = new Map([[tool.name, tool]]);
    const message = await byName.get(toolCall.name)?.invoke(toolCall);
    assert.ok(message instanceof ToolMessage);
    assert.equal(message.tool_call_id, "fake-1");
    assert.deepEqual(JSON.parse(String(message.content)), { id: 3, status: "shipped" });
    assert.deepEqual(executed, ["fake-1"]);
  });

  it("lets a control-flow throw pass through untouched", async () => {
    const pause = Object.assign(new Error("paused"), { [controlFlowBrand]: true });
    const [pausing] = toLangChainTools(
      createToolSet([
        defineTool({
          name: "pausing",
          description: "Pauses for a human.",
          input: z.object({}),
          execute: () => {
            throw pause;
          },
        }),
      ]),
    );
    await assert.rejects(
      Promise.resolve(pausing?.invoke({ type: "tool_call", id: "p", name: "pausing", args: {} })),
      (error) => error === pause,
    );
  });
});
