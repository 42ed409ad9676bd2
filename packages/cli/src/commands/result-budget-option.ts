/** `--result-budget <tokens>`, shared by `serve` and `mcp`: the token budget of one tool answer. */
import { ToolError } from "@tackle/core";
import { createResultPages, defaultResultBudget } from "@tackle/core/mcp";
import type { Command } from "commander";
import { CliError } from "../program/cli-error.ts";

export function resultBudgetOption(command: Command): Command {
  return command.option(
    "--result-budget <tokens>",
    `tokens (o200k) of one tool answer a model reads; a longer one is cut and paged by cursor (default ${defaultResultBudget})`,
    readResultBudget,
  );
}

function readResultBudget(value: string): number {
  const budget = /^\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
  try {
    createResultPages({ budget }); // refused here by the same rule the server applies
  } catch (error) {
    if (!ToolError.isInstance(error)) throw error;
    throw new CliError("invalid_arguments", `--result-budget: ${error.message}`, {
      cause: error,
      exitCode: 2,
    });
  }
  return budget;
}
