/** A bound given as a count (requests, streams): a whole number of at least `least`, else refused. */
import { CliError } from "./cli-error.ts";

export function boundCount(name: string, value: number | undefined, fallback: number, least = 1): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < least) {
    throw new CliError(
      "invalid_arguments",
      `${name} must be a whole number, at least ${least} (got ${value})`,
      {
        exitCode: 2,
      },
    );
  }
  return value;
}
