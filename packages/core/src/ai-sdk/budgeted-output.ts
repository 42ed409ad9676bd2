/**
 * The token budget of what a model reads from an AI SDK tool (ADR 0532): the program keeps the whole
 * output; the model reads it through `toModelOutput`, cut past the budget into its first part, a
 * summary of what was left out and a cursor, and reads on with the paging tool. The cutting, the kept
 * rest and the cursors are `createResultPages`', as on every MCP server of Tackle.
 */
import { createHash, randomUUID } from "node:crypto";
import type { CallToolResult } from "@modelcontextprotocol/server";
import { type Tool as AiSdkTool, type JSONValue, jsonSchema, tool } from "ai";
import { createResultPages, type ResultPages } from "../mcp/result-pages/create-result-pages.ts";
import { assertNoPagingToolClash, modelPagingToolName } from "../mcp/result-pages/text-pages.ts";
import { toCallToolResult } from "../mcp/to-call-tool-result.ts";
import { isToolContent } from "../tool/tool-content.ts";
import type { ToolSet } from "../tool-set/create-tool-set.ts";

export type ModelOutput = Awaited<ReturnType<NonNullable<AiSdkTool["toModelOutput"]>>>;

/** Cut text answers remembered by call id: the AI SDK asks again as it builds each step's messages. */
const rememberedAnswers = 1_024;

export interface ModelOutputBudget {
  /**
   * What the model reads of a successful output: the output itself within the budget, else its first
   * part. `text` is the output as the model would read it whole — a string itself, anything else its
   * JSON, written once by the caller (which first checks that JSON can write it).
   */
  fit(toolCallId: string, output: unknown, text: string): ModelOutput;
  /** The paging tool, to add beside the set's tools. */
  readonly pagingTool: AiSdkTool;
}

export function createModelOutputBudget(budget: number, toolset: ToolSet): ModelOutputBudget {
  assertNoPagingToolClash(toolset);
  const pages = createResultPages({ budget, toolName: modelPagingToolName });
  const owner = randomUUID();
  const cutAnswers = rememberCutAnswers();
  return {
    fit(toolCallId, output, text) {
      const known = cutAnswers.recall(toolCallId, output);
      if (known !== undefined) return known;
      const fitted = fitOutput(pages, owner, output, text);
      if (fitted === undefined) return wholeOutput(output);
      cutAnswers.keep(toolCallId, output, fitted);
      return fitted;
    },
    pagingTool: pagingTool(pages, owner),
  };
}

/**
 * The cut answers given, so the AI SDK asking again for one call's output gets the same part and
 * cursor. By call id and the output itself: some providers number their calls afresh in every request
 * ("call_0"), so an id alone could hand one run's answer to another's. An object output is known by
 * identity (held weakly); a text by a digest of it, so no output is kept alive here.
 */
function rememberCutAnswers() {
  const byObject = new WeakMap<object, Map<string, ModelOutput>>();
  const byText = new Map<string, { digest: string; answer: ModelOutput }>();
  const digestOf = (text: string) => createHash("sha256").update(text).digest("base64url");
  return {
    recall(toolCallId: string, output: unknown): ModelOutput | undefined {
      if (typeof output === "object" && output !== null) return byObject.get(output)?.get(toolCallId);
      const known = byText.get(toolCallId);
      return known !== undefined && known.digest === digestOf(String(output)) ? known.answer : undefined;
    },
    keep(toolCallId: string, output: unknown, answer: ModelOutput): void {
      if (typeof output === "object" && output !== null) {
        const answers = byObject.get(output) ?? new Map<string, ModelOutput>();
        answers.set(toolCallId, answer);
        byObject.set(output, answers);
        return;
      }
      byText.delete(toolCallId);
      byText.set(toolCallId, { digest: digestOf(String(output)), answer });
      if (byText.size > rememberedAnswers) byText.delete(byText.keys().next().value as string);
    },
  };
}

/** The output as the model reads it whole: a string as text, anything else as JSON. */
export function wholeOutput(output: unknown): ModelOutput {
  return typeof output === "string"
    ? { type: "text", value: output }
    : { type: "json", value: (output ?? null) as JSONValue };
}

/** The output's first part and summary when it is past the budget; undefined when it fits. */
function fitOutput(
  pages: ResultPages,
  owner: string,
  output: unknown,
  text: string,
): ModelOutput | undefined {
  // As the model would read it whole: the content blocks, else the text itself or the JSON text.
  const result: CallToolResult = isToolContent(output)
    ? toCallToolResult({ ok: true, output })
    : { content: [{ type: "text", text }] };
  const fitted = pages.fit(result, owner);
  return fitted === result ? undefined : contentOutput(fitted);
}

function pagingTool(pages: ResultPages, owner: string): AiSdkTool {
  return tool({
    description: pages.tool.description ?? "",
    inputSchema: jsonSchema<{ cursor: string }>(pages.tool.inputSchema as never),
    execute: (input: { cursor: string }) => pages.page(input, owner),
    toModelOutput: ({ output }: { output: CallToolResult }): ModelOutput =>
      output.isError === true
        ? {
            type: "error-json",
            value: ((output.structuredContent as { error?: JSONValue } | undefined)?.error ??
              null) as JSONValue,
          }
        : contentOutput(output),
  });
}

/** A cut part as AI SDK content: text as text, image and audio as files, anything else as its JSON. */
function contentOutput(result: CallToolResult): ModelOutput {
  return {
    type: "content",
    value: result.content.map((block) => {
      if (block.type === "text") return { type: "text" as const, text: block.text };
      if (block.type === "image" || block.type === "audio") {
        return {
          type: "file" as const,
          data: { type: "data" as const, data: block.data },
          mediaType: block.mimeType,
        };
      }
      return { type: "text" as const, text: JSON.stringify(block) };
    }),
  };
}
