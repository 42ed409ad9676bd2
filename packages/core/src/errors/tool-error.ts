/** The one wire error of Tackle: a string `code`, a `retryable` flag and JSON `data`, typed by code. */
import { brandChain, hasBrand, ownBrand } from "./brand.ts";
import type { ValidationIssue } from "./validation-issue.ts";

/** Why a value was refused: the first issues (twenty, each bounded) and how many more there were. */
export interface IssuesData {
  /** The tool whose schema refused the value. */
  readonly tool: string;
  /** Where and why, in order: the first twenty. */
  readonly issues: readonly ValidationIssue[];
  /** Issues past the first twenty, left out. */
  readonly omittedIssues?: number;
}

/** The `data` of each code core itself reports. */
export interface ToolErrorDataByCode {
  /** The arguments did not match the tool's input schema. */
  readonly invalid_input: IssuesData;
  /** The tool returned a value its own output schema refuses: a bug in the tool. */
  readonly invalid_output: IssuesData;
  /** The tool did not finish within its time limit (retryable). */
  readonly timeout: { readonly tool: string; readonly timeoutMs: number };
  /** The caller cancelled the call through its signal. */
  readonly aborted: { readonly tool: string };
  /** The tool threw something that was not a ToolError. */
  readonly tool_failed: { readonly tool: string };
  /** No tool by that name; `available` lists the names that exist. */
  readonly unknown_tool: { readonly tool: string; readonly available: readonly string[] };
  /**
   * A lookup of stored data found nothing (or another identity's, which looks the same): every
   * package answers this one code, naming the `resource` (`run`, `document`, `memory`, …) and the
   * `id` asked for (ADR 0027). A name outside a vocabulary is `unknown_<thing>` instead.
   */
  readonly not_found: NotFoundData;
  /**
   * An MCP server's answer past its token budget from a tool that declares an output schema
   * (ADR 0542): its structured content is left out and its text cut; the result's content is the
   * first part, and `cursor` reads every part from the first with the paging tool. `tokens` is the
   * whole answer's (`estimated` when too long to count).
   */
  readonly answer_too_large: {
    readonly tool: string;
    readonly budget: number;
    readonly tokens: number;
    readonly estimated?: true;
    readonly cursor?: string;
  };
}

/** The `data` of a `not_found` error: what was looked for, and by which id. */
export interface NotFoundData {
  readonly resource: string;
  readonly id: string;
}

/** The codes core reports. A tool may throw a ToolError with a code of its own. */
export type ToolErrorCode = keyof ToolErrorDataByCode;

/** What crosses a wire: never a stack. */
export interface ToolErrorPayload<Code extends string = string, Data = unknown> {
  readonly code: Code;
  readonly message: string;
  readonly retryable?: boolean;
  readonly data?: Data;
}

export interface ToolErrorOptions<Data = unknown> {
  readonly retryable?: boolean;
  readonly data?: Data;
  readonly cause?: unknown;
}

// biome-ignore lint/suspicious/noExplicitAny: any constructor signature; only the instance type matters
type ToolErrorClass = abstract new (...args: any[]) => ToolError<string, unknown>;

export class ToolError<Code extends string = string, Data = unknown> extends Error {
  /** Each subclass declares its own, so `Sub.isInstance` narrows to `Sub` only. */
  static readonly brand: symbol = Symbol.for("tackle.tool-error");
  readonly code: Code;
  readonly retryable: boolean;
  readonly data: Data;

  constructor(code: Code, message: string, options: ToolErrorOptions<Data> = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ToolError";
    this.code = code;
    this.retryable = options.retryable ?? false;
    this.data = options.data as Data;
    brandChain(this, new.target, ToolError);
  }

  /**
   * True for an instance of this very class (or a subclass of it), even from another copy of the
   * package: `ToolError.isInstance` answers for every Tackle wire error, `InvalidInputError.isInstance`
   * only for invalid input.
   */
  static isInstance<Class extends ToolErrorClass>(
    this: Class & { readonly brand: symbol },
    value: unknown,
  ): value is InstanceType<Class> {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class the check was called on
    return hasBrand(value, ownBrand(this));
  }

  /** The wire form: code, message, retryable and data; no stack, no cause. */
  toJSON(): ToolErrorPayload<Code, Data> {
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

/** The errors core itself reports, each code with its `data`: narrow one with `error.code`. */
export type CoreToolError = {
  [Code in ToolErrorCode]: ToolError<Code, ToolErrorDataByCode[Code]>;
}[ToolErrorCode];

/**
 * True for a Tackle error saying a lookup found nothing (code `not_found`, ADR 0027), of `resource`
 * when given: `isNotFound(error, "run")`. Works on errors rebuilt from a wire.
 */
export function isNotFound(error: unknown, resource?: string): error is ToolError<"not_found", NotFoundData> {
  if (!ToolError.isInstance(error) || error.code !== "not_found") return false;
  if (resource === undefined) return true;
  const data = error.data as Partial<NotFoundData> | undefined;
  return data?.resource === resource;
}
