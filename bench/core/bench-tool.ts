/** The tool every row of the core bench calls: small input, small output, so overhead dominates. */
import { createToolSet, defineTool } from "@tackle/core";
import { z } from "zod";

export const addInput = z.object({ a: z.number(), b: z.number() });

export function add({ a, b }: { a: number; b: number }): { sum: number } {
  return { sum: a + b };
}

export const addTool = defineTool({
  name: "math.add",
  description: "Adds two numbers.",
  input: addInput,
  output: z.object({ sum: z.number() }),
  execute: add,
});

export const benchToolSet = createToolSet([addTool]);
