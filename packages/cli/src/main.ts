/** The `tackle` process: runs the program on this process's arguments and streams, and sets the exit code. */

import { ToolDefinitionError, ToolError } from "@tackle/core";
import { CommanderError } from "commander";
import { createPaint } from "./output/colour.ts";
import { createCliLogger } from "./output/create-cli-logger.ts";
import { CliError } from "./program/cli-error.ts";
import { createProgram } from "./program/create-program.ts";

const stopped = new Promise<string>((resolve) => {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      resolve(signal);
      // A second signal while stopping means: stop now.
      process.once(signal, () => process.exit(130));
    });
  }
});

const logger = createCliLogger();
const program = createProgram({
  env: process.env,
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  logger,
  stopped,
});

try {
  await program.parseAsync(process.argv);
} catch (error) {
  process.exitCode = report(error);
}
// Flush stdout before exiting: a pipe is written asynchronously, and lingering sockets must not keep us alive.
await new Promise<void>((resolve) => process.stdout.write("", () => resolve()));
process.exit();

function report(error: unknown): number {
  if (error instanceof CommanderError) {
    return error.code === "commander.helpDisplayed" ||
      error.code === "commander.version" ||
      error.exitCode === 0
      ? 0
      : 2;
  }
  const paint = createPaint(process.stderr);
  if (CliError.isInstance(error)) {
    process.stderr.write(`${paint.red("tackle:")} ${error.message}\n`);
    return error.exitCode;
  }
  if (ToolError.isInstance(error) || ToolDefinitionError.isInstance(error)) {
    process.stderr.write(`${paint.red("tackle:")} ${error.code}: ${error.message}\n`);
    return 1;
  }
  logger.error("unexpected failure", { error: (error as Error)?.stack ?? String(error) });
  process.stderr.write(`${paint.red("tackle:")} ${(error as Error)?.message ?? String(error)}\n`);
  return 1;
}
