/** Long tool answers for the answer-budget tests of every adapter, and how to read a cut one back. */
import { z } from "zod";
import { defineTool } from "../../src/tool/define-tool.ts";
import { createToolSet, type ToolSet } from "../../src/tool-set/create-tool-set.ts";

/** ~60,000 tokens of prose with lines: about thirty parts at a budget of 2,000. */
export const longText = Array.from(
  { length: 3_000 },
  (_, line) => `Line ${line}: the quick brown fox jumps over the lazy dog, again and again.`,
).join("\n");

/** `rows` rows of `{ id, name }`. */
export const manyRows = (rows: number) =>
  Array.from({ length: rows }, (_, id) => ({ id, name: `row ${id}` }));

/** `report.text` (the long text), `report.rows` (`{ rows }`) and `report.short` (`{ n: 1 }`). */
export function reportTools(rows: readonly unknown[]): ToolSet {
  return createToolSet([
    defineTool({
      name: "report.text",
      description: "A long report.",
      input: z.object({}),
      execute: () => longText,
    }),
    defineTool({
      name: "report.rows",
      description: "Many rows.",
      input: z.object({}),
      execute: () => ({ rows }),
    }),
    defineTool({
      name: "report.short",
      description: "A short one.",
      input: z.object({}),
      execute: () => ({ n: 1 }),
    }),
  ]);
}

/** The cursor a cut answer's summary ends with, as the model reads it. */
export const cursorIn = (text: string) => /tackle_result_page \{"cursor":"([^"]+)"\}/.exec(text)?.[1];

/** A part's own text, read as one string: the summary (the last paragraph, in brackets) left out. */
export const partText = (text: string) => text.slice(0, text.lastIndexOf("\n\n["));

/** A set with a tool of the paging tool's model-safe name, which a budgeted adapter refuses. */
export const clashingTools = (): ToolSet =>
  createToolSet([
    defineTool({ name: "tackle_result_page", description: "Mine.", input: z.object({}), execute: () => 1 }),
  ]);
