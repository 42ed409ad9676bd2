/** `CliError`: a refusal the `tackle` command explains in one line and exits non-zero on. */
import { hasBrand, setBrand } from "@tackle/core/internal";

const cliErrorBrand = Symbol.for("tackle.cli-error");

export type CliErrorCode =
  | "invalid_listen"
  | "not_loopback"
  | "invalid_arguments"
  | "invalid_configuration"
  | "console_unavailable"
  | "broker_unavailable"
  | "console_unauthorized"
  | "token_file";

export class CliError extends Error {
  readonly code: CliErrorCode;
  /** The process exit code: 2 for a usage or configuration mistake, 1 otherwise. */
  readonly exitCode: number;

  constructor(code: CliErrorCode, message: string, options: { cause?: unknown; exitCode?: number } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "CliError";
    this.code = code;
    this.exitCode = options.exitCode ?? 1;
    setBrand(this, cliErrorBrand);
  }

  static isInstance(value: unknown): value is CliError {
    return hasBrand(value, cliErrorBrand);
  }
}
