/**
 * What a cut answer does with the structured content of a tool that declares an output schema
 * (ADR 0542). A spec-following client checks such a result's structured content against the schema
 * unless the result is an error, and throws when it is missing: content within the budget is kept
 * whole; past it, it is left out and the cut answer is marked an error, coded `answer_too_large`,
 * whose data says how to read every part.
 */
import type { CallToolResult } from "@modelcontextprotocol/server";
import { ToolError } from "../../errors/tool-error.ts";
import { fitsTokens } from "../../tokens/count-tokens.ts";
import type { Totals } from "./kept-results.ts";

/** What `fit` knows of the tool that answered. */
export interface FitOptions {
  /** The tool's name, as an answer past the budget names it. Default `tool`. */
  readonly tool?: string;
  /**
   * Whether the tool advertises an output schema. Then structured content within the budget stays
   * whole on a cut answer; past it, it is left out and the answer is an error (`answer_too_large`),
   * so a client neither rejects the answer nor receives the whole object.
   */
  readonly outputSchema?: boolean;
}

/** `none`: a cut answer has no structured content; `kept`: whole; `withheld`: left out, marked an error. */
export type DeclaredStructure = "none" | "kept" | "withheld";

/** Tokens held back on the first part for the `answer_too_large` error a client may read instead. */
export const withheldErrorTokens = 300;

/** The sentence a withheld answer's summary adds after the budget. */
export const withheldNote =
  "; it is marked an error because its structured content is left out (a client checks that against the tool's output schema)";

/** Where a cut answer's structured content goes. */
export function declaredStructure(
  result: CallToolResult,
  budget: number,
  options: FitOptions,
): DeclaredStructure {
  const structured = result.structuredContent;
  if (options.outputSchema !== true || result.isError === true || structured === undefined) return "none";
  return fitsTokens(JSON.stringify(structured), budget) ? "kept" : "withheld";
}

/** How a withheld answer may be read: from its first part by cursor, whole already, or not kept. */
export type Reading =
  | { readonly kind: "cursor"; readonly cursor: string }
  | { readonly kind: "complete" }
  | { readonly kind: "not_kept"; readonly bytes: number };

/** The fitted answer with its structured content as `structure` says. */
export function withDeclaredStructure(
  fitted: CallToolResult,
  result: CallToolResult,
  structure: DeclaredStructure,
  about: {
    readonly tool: string;
    readonly budget: number;
    readonly totals: Totals;
    readonly toolName: string;
    readonly reading: Reading;
  },
): CallToolResult {
  if (structure === "none") return fitted;
  if (structure === "kept") {
    return { ...fitted, structuredContent: result.structuredContent as Record<string, unknown> };
  }
  const { budget, totals, toolName, reading } = about;
  const tool = about.tool.length <= 100 ? about.tool : `${about.tool.slice(0, 100)}…`;
  const tokens = `${totals.estimated ? "about " : ""}${totals.tokens}`;
  const how =
    reading.kind === "cursor"
      ? `its text comes in parts. This result's text is part 1; read every part with ${toolName}, from {"cursor":"${reading.cursor}"}`
      : reading.kind === "complete"
        ? "this result's text is the whole of it"
        : `it is too large to keep for paging (${reading.bytes} bytes): ask the tool for less`;
  const error = new ToolError(
    "answer_too_large",
    `The answer of "${tool}" (${tokens} tokens) is past the budget of ${budget} tokens: its structured content is left out, and ${how}.`,
    {
      data: {
        tool,
        budget,
        tokens: totals.tokens,
        ...(totals.estimated ? { estimated: true as const } : {}),
        ...(reading.kind === "cursor" ? { cursor: reading.cursor } : {}),
      },
    },
  );
  return {
    ...fitted,
    isError: true,
    structuredContent: { error: error.toJSON() as unknown as Record<string, unknown> },
  };
}
