/** Type tests: each error class's guard narrows to that class, its code and its typed payload. */
import {
  type CoreToolError,
  InvalidInputError,
  InvalidOutputError,
  ToolAbortedError,
  ToolDefinitionError,
  ToolError,
  type ToolErrorCode,
  ToolFailedError,
  ToolTimeoutError,
  UnknownToolError,
  type ValidationIssue,
} from "@tackle/core";
import type { Equal, Expect } from "./expect.ts";

export function narrowsToTheClass(value: unknown): void {
  if (InvalidInputError.isInstance(value)) {
    type _class = Expect<Equal<typeof value, InvalidInputError>>;
    type _code = Expect<Equal<typeof value.code, "invalid_input">>;
    type _data = Expect<
      Equal<
        typeof value.data,
        {
          readonly tool: string;
          readonly issues: readonly ValidationIssue[];
          readonly omittedIssues?: number;
        }
      >
    >;
    // @ts-expect-error: an invalid-input error has no time limit in its data
    value.data.timeoutMs;
  }
  if (ToolTimeoutError.isInstance(value)) {
    type _code = Expect<Equal<typeof value.code, "timeout">>;
    type _data = Expect<Equal<typeof value.data.timeoutMs, number>>;
    // @ts-expect-error: a timeout's code is "timeout" only
    const _wrong: "invalid_input" = value.code;
  }
  if (UnknownToolError.isInstance(value)) {
    type _data = Expect<Equal<typeof value.data.available, readonly string[]>>;
  }
  if (InvalidOutputError.isInstance(value)) {
    type _c = Expect<Equal<typeof value.code, "invalid_output">>;
  }
  if (ToolAbortedError.isInstance(value)) {
    type _c = Expect<Equal<typeof value.code, "aborted">>;
  }
  if (ToolFailedError.isInstance(value)) {
    type _c = Expect<Equal<typeof value.code, "tool_failed">>;
  }
  if (ToolError.isInstance(value)) {
    // The base guard narrows to any wire error: any code, unknown data.
    type _code = Expect<Equal<typeof value.code, string>>;
    type _data = Expect<Equal<typeof value.data, unknown>>;
  }
}

export function aDefinitionErrorIsNotAWireError(value: unknown): void {
  if (ToolDefinitionError.isInstance(value)) {
    type _code = Expect<Equal<typeof value.code, "invalid_tool_definition" | "duplicate_tool">>;
    // @ts-expect-error: a definition error has no wire form
    value.toJSON();
    // @ts-expect-error: and is not a ToolError
    const _wire: ToolError = value;
  }
}

export function coreErrorsNarrowByCode(error: CoreToolError): void {
  type _codes = Expect<Equal<CoreToolError["code"], ToolErrorCode>>;
  if (error.code === "timeout") {
    type _data = Expect<Equal<typeof error.data.timeoutMs, number>>;
  }
  if (error.code === "unknown_tool") {
    type _data = Expect<Equal<typeof error.data.available, readonly string[]>>;
  }
}

export function aWireErrorTakesItsOwnCodes(): void {
  // A tool may throw a ToolError of its own code; the code's type is what it was given.
  const own = new ToolError("card_declined", "declined", { data: { last4: "4242" } });
  type _code = Expect<Equal<typeof own.code, "card_declined">>;
  type _data = Expect<Equal<typeof own.data, { last4: string }>>;
  type _json = Expect<Equal<ReturnType<typeof own.toJSON>["code"], "card_declined">>;
}
