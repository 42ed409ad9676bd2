/** The one error shape of Tackle: a string `code`, a `retryable` flag and JSON `data`. */
const toolErrorBrand = Symbol.for("tackle.tool-error");

/** What crosses a wire: never a stack. */
export interface ToolErrorPayload {
  readonly code: string;
  readonly message: string;
  readonly retryable?: boolean;
  readonly data?: unknown;
}

export interface ToolErrorOptions {
  readonly retryable?: boolean;
  readonly data?: unknown;
  readonly cause?: unknown;
}

export class ToolError extends Error {
  readonly [toolErrorBrand] = true;
  readonly code: string;
  readonly retryable: boolean;
  readonly data: unknown;

  constructor(code: string, message: string, options: ToolErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ToolError";
    this.code = code;
    this.retryable = options.retryable ?? false;
    this.data = options.data;
  }

  /** True for any Tackle error, even one from another copy of this package. */
  static isInstance(value: unknown): value is ToolError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as Record<symbol, unknown>)[toolErrorBrand] === true
    );
  }

  /** The wire form: code, message, retryable and data; no stack, no cause. */
  toJSON(): ToolErrorPayload {
    return {
      code: this.code,
      message: this.message,
      retryable: this.retryable,
      ...(this.data === undefined ? {} : { data: this.data }),
    };
  }

  /** Rebuilds an error received over a wire. */
  static fromPayload(payload: ToolErrorPayload): ToolError {
    return new ToolError(payload.code, payload.message, {
      retryable: payload.retryable ?? false,
      data: payload.data,
    });
  }
}
