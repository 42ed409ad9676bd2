/**
 * A core flood (ADR 0555): a tool answers one long line of base64, and the host cuts it to the token
 * budget (`createResultPages().fit`), its first part ending with a summary of the whole answer's tokens.
 * Shipped, that total is counted up to 100,000 characters and estimated past them from spread slices;
 * the baseline counts the whole text with the same tokenizer (`countTokens`, o200k_base), as the summary
 * did before (the sample's bound is a constant, no option: the baseline is the cut plus that count).
 */
import { randomBytes } from "node:crypto";
import { createResultPages } from "@tackle/core/mcp";
import { countTokens } from "@tackle/core/tokens";
import { type FloodRow, measured, rest, type Variant } from "./measure.ts";

export async function base64AnswerFlood(variant: Variant, scale: number): Promise<FloodRow> {
  const characters = Math.round(1_000_000 * scale);
  const text = randomBytes(Math.ceil((characters * 3) / 4))
    .toString("base64")
    .slice(0, characters);
  // The tokenizer's tables load on the first count: not the flood's cost.
  countTokens("warm the tokenizer's tables");
  let summary = "";
  let counted: number | undefined;
  const result = await measured(async () => {
    const first = createResultPages().fit({ content: [{ type: "text", text }] }, "caller");
    summary = (first.content.at(-1) as { text?: string }).text ?? "";
    if (variant === "unbounded") counted = countTokens(text);
  });
  const said = /characters of text, (about )?(\d+) tokens/.exec(summary);
  return {
    flood: "core: base64 answer cut",
    workload: `one tool answer of ${characters.toLocaleString("en")} base64 characters on one line, cut to the default budget (8,000 tokens)`,
    service:
      variant === "bounded"
        ? "bounded (total counted to 100,000 characters, estimated past)"
        : "unbounded (the cut, and the whole text counted)",
    accepted: 1,
    refused: {},
    ...rest(result),
    notes:
      counted === undefined
        ? `the summary says ${said?.[2] ?? "?"} tokens (estimated)`
        : `counted ${counted} tokens`,
  };
}
