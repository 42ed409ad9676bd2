/**
 * `tackle call <module>.<tool> [json]`: the result on stdout (JSON, or plain text for a text-only
 * content result); an error on stderr with exit code 1.
 */
import { text } from "node:stream/consumers";
import type { Command } from "commander";
import { formatCallOutput } from "../output/format-call-output.ts";
import { CliError } from "../program/cli-error.ts";
import { openToolSource } from "../program/open-tool-source.ts";
import type { ProgramContext } from "../program/program-context.ts";
import { splitToolName } from "../tool-source/split-tool-name.ts";
import { sourceOptions } from "./source-options.ts";

interface CallOptions {
  console?: string;
  tokenFile?: string;
  builtin?: boolean;
  timeout?: string;
}

export function addCallCommand(program: Command, context: ProgramContext): void {
  const command = program
    .command("call")
    .description("Call a tool and print its result (JSON; plain text for a text-only content result)")
    .argument("<tool>", "the tool, as module.tool (see tackle tools)")
    .argument(
      "[json]",
      "the arguments as a JSON object; read from stdin when omitted and stdin is not a terminal",
    )
    .option("--timeout <ms>", "give up after this many milliseconds");
  sourceOptions(command).action(async (tool: string, json: string | undefined, options: CallOptions) => {
    if (splitToolName(tool) === undefined) {
      throw new CliError("invalid_arguments", `"${tool}" is not module.tool (for example demo.echo)`, {
        exitCode: 2,
      });
    }
    const args = parseArguments(json ?? (context.stdin.isTTY === true ? "{}" : await text(context.stdin)));
    const timeoutMs = options.timeout === undefined ? undefined : Number(options.timeout);
    if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
      throw new CliError(
        "invalid_arguments",
        `--timeout ${options.timeout} is not a positive number of milliseconds`,
        { exitCode: 2 },
      );
    }
    const source = await openToolSource({ ...options, env: context.env, logger: context.logger });
    try {
      const result = await source.call(tool, args, timeoutMs === undefined ? {} : { timeoutMs });
      if (result.ok) {
        context.stdout.write(formatCallOutput(result.output));
        return;
      }
      const { data } = result.error;
      context.stderr.write(
        `error ${result.error.code}: ${result.error.message}\n${data === undefined ? "" : `${JSON.stringify(data, null, 2)}\n`}`,
      );
      process.exitCode = 1;
    } finally {
      await source.close();
    }
  });
}

function parseArguments(json: string): unknown {
  const trimmed = json.trim();
  if (trimmed === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(trimmed);
  } catch (error) {
    throw new CliError("invalid_arguments", `The arguments are not JSON: ${(error as Error).message}`, {
      exitCode: 2,
    });
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new CliError("invalid_arguments", 'The arguments must be a JSON object, e.g. \'{"text":"hi"}\'', {
      exitCode: 2,
    });
  }
  return value;
}
