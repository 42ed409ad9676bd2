/**
 * Answers a model reads as text (OpenAI's tool messages, LangChain's) fitted to a token budget (ADR
 * 0532): within it the text itself; past it its first part and a summary of what was left out, ending
 * with a cursor that the paging tool `tackle_result_page` reads on. `createResultPages` cuts and keeps.
 */
import { randomUUID } from "node:crypto";
import type { CallToolResult } from "@modelcontextprotocol/server";
import { ToolDefinitionError } from "../../errors/tool-definition-error.ts";
import type { ToolSet } from "../../tool-set/create-tool-set.ts";
import { createResultPages } from "./create-result-pages.ts";

/** The paging tool's name where a model calls tools by model-safe names. */
export const modelPagingToolName = "tackle_result_page";

export interface TextPages {
  readonly budget: number;
  /** The paging tool's description and JSON Schema, for its definition beside the set's tools. */
  readonly description: string;
  readonly inputSchema: Record<string, unknown>;
  /** The text as the model reads it: itself within the budget, else its first part and a summary. */
  fit(text: string): string;
  /** The paging tool's answer: the next part, or (`ok: false`) the coded error as `{ error }` JSON. */
  page(args: unknown): { readonly ok: boolean; readonly text: string };
}

export function createTextPages(budget: number, owner: string = randomUUID()): TextPages {
  const pages = createResultPages({ budget, toolName: modelPagingToolName });
  return {
    budget,
    description: pages.tool.description ?? "",
    inputSchema: pages.tool.inputSchema,
    fit(text) {
      const result: CallToolResult = { content: [{ type: "text", text }] };
      const fitted = pages.fit(result, owner);
      return fitted === result ? text : joinedText(fitted);
    },
    page(args) {
      const answer = pages.page(args, owner);
      if (answer.isError !== true) return { ok: true, text: joinedText(answer) };
      return {
        ok: false,
        text: JSON.stringify({
          error: (answer.structuredContent as { error?: unknown } | undefined)?.error ?? null,
        }),
      };
    },
  };
}

/** Refuses a set with a tool whose model-safe name is the paging tool's, naming it. */
export function assertNoPagingToolClash(toolset: ToolSet): void {
  if (!toolset.tools.some((tool) => toolset.llmName(tool.name) === modelPagingToolName)) return;
  throw new ToolDefinitionError(
    "invalid_tool_definition",
    `A tool named "${modelPagingToolName}" clashes with the paging tool of cut answers (pass resultBudget: false to hand the model whole answers)`,
    { name: modelPagingToolName },
  );
}

/** A cut part as one text: its text, then the summary that ends it. */
function joinedText(result: CallToolResult): string {
  return result.content
    .map((block) => (block.type === "text" ? block.text : JSON.stringify(block)))
    .join("\n\n");
}
