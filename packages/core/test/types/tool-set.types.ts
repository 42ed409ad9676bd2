/** Type tests: a tool set built from defined tools keeps each tool's name, input and output types. */
import {
  type AnyTool,
  createToolSet,
  defineTool,
  type LlmName,
  type Tool,
  type ToolCallResult,
  type ToolSet,
  type TypedToolSet,
} from "@tackle/core";
import { toAiSdkTools } from "@tackle/core/ai-sdk";
import { type ToolSet as AiSdkToolSet, generateText, type LanguageModel } from "ai";
import { z } from "zod";
import type { Equal, Expect } from "./expect.ts";

const getOrder = defineTool({
  name: "orders.get",
  description: "Reads an order.",
  input: z.object({ id: z.string() }),
  execute: async ({ id }) => ({ id, status: "shipped" as const }),
});
const listOrders = defineTool({
  name: "orders.list",
  description: "Lists orders.",
  input: z.object({ limit: z.number().int().default(10) }),
  execute: ({ limit }) => Array.from({ length: limit }, (_, index) => String(index)),
});

export async function definedToolsKeepTheirTypes(): Promise<void> {
  type _name = Expect<Equal<typeof getOrder.name, "orders.get">>;
  type _tool = Expect<
    Equal<
      typeof getOrder,
      Tool<{ id: string }, { id: string; status: "shipped" }, "orders.get", { id: string }>
    >
  >;

  const set = createToolSet([getOrder, listOrders]);
  type _set = Expect<Equal<typeof set, TypedToolSet<typeof getOrder | typeof listOrders>>>;
  type _names = Expect<Equal<(typeof set.names)[number], "orders.get" | "orders.list">>;

  const result = await set.call("orders.get", { id: "7" });
  type _result = Expect<Equal<typeof result, ToolCallResult<{ id: string; status: "shipped" }>>>;
  if (result.ok) {
    type _output = Expect<Equal<typeof result.output.status, "shipped">>;
  }
  const ids = await set.invoke("orders.list", {}); // `limit` has a default: the caller may leave it out
  type _ids = Expect<Equal<typeof ids, string[]>>;
  type _got = Expect<Equal<ReturnType<typeof set.get<"orders.get">>, typeof getOrder | undefined>>;

  // @ts-expect-error: no tool by that name in the set
  await set.call("orders.delete", { id: "7" });
  // @ts-expect-error: `id` is a string
  await set.call("orders.get", { id: 7 });
  // @ts-expect-error: `id` is required
  await set.call("orders.get", {});
  // @ts-expect-error: the arguments of another tool
  await set.call("orders.get", { limit: 3 });
  // @ts-expect-error: invoke is checked the same way
  await set.invoke("orders.list", { limit: "3" });
  // @ts-expect-error: the output of orders.get has no `total`
  if (result.ok) result.output.total;
}

export async function dynamicSetsStayUntyped(loaded: readonly AnyTool[]): Promise<void> {
  const set = createToolSet(loaded);
  type _set = Expect<Equal<typeof set, ToolSet>>;
  const result = await set.call("any.name", { anything: true });
  type _result = Expect<Equal<typeof result, ToolCallResult>>;
  if (result.ok) {
    type _output = Expect<Equal<typeof result.output, unknown>>;
  }
  // Mixing a loaded tool in makes the whole set dynamic.
  const mixed = createToolSet([getOrder, ...loaded]);
  type _mixed = Expect<Equal<typeof mixed, ToolSet>>;
}

export function aTypedSetIsAToolSet(): void {
  const takesAnySet = (_set: ToolSet): void => {};
  takesAnySet(createToolSet([getOrder, listOrders]));
  takesAnySet(createToolSet([]));
}

export function modelSafeNames(): void {
  type _dots = Expect<Equal<LlmName<"orders.get">, "orders__get">>;
  type _nested = Expect<Equal<LlmName<"a.b.c">, "a__b__c">>;
  type _plain = Expect<Equal<LlmName<"echo">, "echo">>;
  type _at64 = Expect<
    Equal<
      LlmName<"m.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx">,
      "m__xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    >
  >; // 64 characters: kept
  type _long = Expect<
    Equal<LlmName<"m.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx">, string>
  >; // 65: hashed at run time
  type _dynamic = Expect<Equal<LlmName<string>, string>>;
}

export async function aiSdkToolsAreTypedByModelSafeName(model: LanguageModel): Promise<void> {
  const tools = toAiSdkTools(createToolSet([getOrder, listOrders]));
  // With the paging tool of answers cut to the budget (ADR 0532).
  type _keys = Expect<Equal<keyof typeof tools, "orders__get" | "orders__list" | "tackle_result_page">>;
  // @ts-expect-error: the record is keyed by model-safe names, never by dotted ones
  tools["orders.get"];
  const execute = tools.orders__get.execute;
  type _input = Expect<Equal<Parameters<NonNullable<typeof execute>>[0], { id: string }>>;

  const result = await generateText({ model, tools, prompt: "Where is order 7?" });
  for (const call of result.staticToolCalls) {
    if (call.toolName === "orders__get") {
      type _callInput = Expect<Equal<typeof call.input, { id: string }>>;
    }
  }
  const untyped = toAiSdkTools(createToolSet([] as AnyTool[]));
  type _untyped = Expect<Equal<typeof untyped, AiSdkToolSet>>;
}
