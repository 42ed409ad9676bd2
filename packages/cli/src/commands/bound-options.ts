/**
 * The flags that bound what a caller holds at once (ADR 0270): `--max-in-flight` on `serve` and `mcp`,
 * `--max-streams` on `serve`, `--max-waiting` on `mcp`.
 */
import type { Command } from "commander";
import { defaultMaxInFlight, defaultMaxStreams } from "../console/request-bounds.ts";
import { defaultStdioMaxInFlight, defaultStdioMaxWaiting } from "../mcp/stdio-admission.ts";
import { CliError } from "../program/cli-error.ts";

export interface BoundFlags {
  maxInFlight?: number;
  maxStreams?: number;
  maxWaiting?: number;
}

/** `tackle serve`'s: what the bearer token, and the signed-in web page, each hold at once. */
export function consoleBoundOptions(command: Command): Command {
  return command
    .option(
      "--max-in-flight <requests>",
      `requests the console serves at once for its bearer token, and apart for the signed-in web page; past it 429 (default ${defaultMaxInFlight})`,
      count("--max-in-flight", 1),
    )
    .option(
      "--max-streams <streams>",
      `event streams the console holds open at once for each of them, apart from their requests (default ${defaultMaxStreams})`,
      count("--max-streams", 1),
    );
}

/** `tackle mcp`'s: requests handled at once over stdio, and how many more wait in line. */
export function stdioBoundOptions(command: Command): Command {
  return command
    .option(
      "--max-in-flight <requests>",
      `requests handled at once; the rest wait in line, in order (default ${defaultStdioMaxInFlight})`,
      count("--max-in-flight", 1),
    )
    .option(
      "--max-waiting <requests>",
      `requests waiting in line past --max-in-flight; past them a request is answered -32000 overloaded (default ${defaultStdioMaxWaiting})`,
      count("--max-waiting", 0),
    );
}

/** The flags given, as the printed client entries pass them on. */
export function passedBoundFlags(flags: BoundFlags): string[] {
  return [
    ...(flags.maxInFlight === undefined ? [] : ["--max-in-flight", String(flags.maxInFlight)]),
    ...(flags.maxStreams === undefined ? [] : ["--max-streams", String(flags.maxStreams)]),
    ...(flags.maxWaiting === undefined ? [] : ["--max-waiting", String(flags.maxWaiting)]),
  ];
}

function count(flag: string, least: number): (value: string) => number {
  return (value) => {
    const number = /^\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
    if (!Number.isSafeInteger(number) || number < least) {
      throw new CliError(
        "invalid_arguments",
        `${flag} must be a whole number, at least ${least} (got ${JSON.stringify(value)})`,
        { exitCode: 2 },
      );
    }
    return number;
  };
}
