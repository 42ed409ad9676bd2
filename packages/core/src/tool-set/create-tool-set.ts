/** `createToolSet`: a named collection of tools with one checked way to call them. */
import { randomUUID } from "node:crypto";
import { isControlFlow } from "../errors/control-flow.ts";
import { InvalidInputError } from "../errors/invalid-input-error.ts";
import { InvalidOutputError } from "../errors/invalid-output-error.ts";
import { toToolError } from "../errors/to-tool-error.ts";
import { ToolAbortedError } from "../errors/tool-aborted-error.ts";
import { ToolDefinitionError } from "../errors/tool-definition-error.ts";
import type { ToolError } from "../errors/tool-error.ts";
import { ToolTimeoutError } from "../errors/tool-timeout-error.ts";
import { UnknownToolError } from "../errors/unknown-tool-error.ts";
import { type ValidationResult, validateNow } from "../schema/schema.ts";
import type {
  AnyTool,
  Identity,
  Tool,
  ToolClient,
  ToolContext,
  ToolProgress,
  ToolTakeover,
} from "../tool/define-tool.ts";
import { type Logger, silentLogger } from "../tool/logger.ts";
import { recordFailure, traceToolCall, tracingIsOff } from "../tracing/trace-tool-call.ts";
import { llmNamePattern, toLlmName } from "./llm-name.ts";
import { createStrayRuns, type StrayRuns } from "./stray-runs.ts";

/**
 * Default per-call time limit. `timeoutMs: 0` (or Infinity) disables it; any other positive limit
 * holds, one past the ~24.8 days a Node timer can wait included; a negative or NaN limit is spent: the
 * call answers `timeout` without running the tool (ADR 0566).
 */
export const DEFAULT_TIMEOUT_MS = 60_000;

export interface CallOptions {
  readonly signal?: AbortSignal;
  readonly callId?: string;
  /** Defaults to the call id. Give the same key when retrying the same logical call. */
  readonly idempotencyKey?: string;
  readonly identity?: Identity;
  readonly logger?: Logger;
  /** Overrides the tool's and the set's time limit for this call. */
  readonly timeoutMs?: number;
  /** Receives the tool's `context.progress(...)` reports. */
  readonly onProgress?: (update: ToolProgress) => void;
  /**
   * The name the caller called this tool by, when a host qualified it (`demo.add` for the set's
   * `add`): the call's errors name the tool so, in their message and `data.tool`.
   */
  readonly calledAs?: string;
  /** What the calling client can be asked (elicitation, sampling), handed to the tool as `context.client`. */
  readonly client?: ToolClient;
  /**
   * This call takes over an earlier run under its idempotency key whose host died mid-call: the tool
   * sees it as `context.takeover`, and its `recover` (when it declares one) is asked before `execute`.
   */
  readonly takeover?: ToolTakeover;
}

/** A call's outcome: errors are data, so a model (or a wire) gets them as values. */
export type ToolCallResult<Output = unknown> =
  | { readonly ok: true; readonly output: Output }
  | { readonly ok: false; readonly error: ToolError };

export interface ToolSetOptions {
  /** Time limit for tools that set none. Default 60 s. */
  readonly timeoutMs?: number;
  readonly logger?: Logger;
  /**
   * Runs of one tool still going after their calls answered `timeout` or `aborted` (the tool ignored
   * its signal) that the set allows; past it that tool's new calls are refused with a retryable
   * `overloaded` until one ends. Default 64; `Infinity` for no bound (ADR 0540).
   */
  readonly maxStrayRuns?: number;
}

/** `unknown` for `any`: a tool of unknown types takes and returns `unknown`, never `any`. */
type Known<T> = 0 extends 1 & T ? unknown : T;

/** The tool of `Tools` called `Name`; in a dynamic set (names typed `string`), any of its tools. */
export type ToolNamed<Tools extends AnyTool, Name extends string> = Tools extends AnyTool
  ? Name extends Tools["name"]
    ? Tools
    : never
  : never;

/** The arguments a caller passes to a tool (its input schema's input type); `unknown` for an untyped tool. */
export type ToolInput<T extends AnyTool> =
  T extends Tool<infer _Input, infer _Output, infer _Name, infer Args> ? Known<Args> : never;

/** What a tool returns; `unknown` for an untyped tool. */
export type ToolOutput<T extends AnyTool> =
  T extends Tool<infer _Input, infer Output, infer _Name, infer _Args> ? Known<Awaited<Output>> : never;

/**
 * A set of tools, any names, `unknown` arguments and output: what a set built from tools known only at
 * run time is (a mesh catalogue, an MCP server's tools), and what every adapter accepts.
 */
export interface ToolSet {
  readonly tools: readonly AnyTool[];
  readonly names: readonly string[];
  get(name: string): AnyTool | undefined;
  has(name: string): boolean;
  /** The model-safe name of a tool (`[A-Za-z0-9_-]{1,64}`). */
  llmName(name: string): string;
  /** The tool name behind a model-safe name, or undefined. */
  fromLlmName(llmName: string): string | undefined;
  /** Validates, runs under timeout and abort, validates output; every failure comes back as data. */
  call(name: string, args: unknown, options?: CallOptions): Promise<ToolCallResult>;
  /** As `call`, but throws the ToolError. */
  invoke(name: string, args: unknown, options?: CallOptions): Promise<unknown>;
}

/**
 * A set built from tools defined in code keeps each tool's types: `call` accepts only the set's names,
 * checks the arguments against that tool's input and types the output. It is a `ToolSet` too, so every
 * adapter takes it.
 */
export interface TypedToolSet<Tools extends AnyTool> extends ToolSet {
  readonly tools: readonly Tools[];
  readonly names: readonly Tools["name"][];
  get<Name extends Tools["name"]>(name: Name): ToolNamed<Tools, Name> | undefined;
  llmName(name: Tools["name"]): string;
  fromLlmName(llmName: string): Tools["name"] | undefined;
  call<Name extends Tools["name"]>(
    name: Name,
    args: ToolInput<ToolNamed<Tools, Name>>,
    options?: CallOptions,
  ): Promise<ToolCallResult<ToolOutput<ToolNamed<Tools, Name>>>>;
  invoke<Name extends Tools["name"]>(
    name: Name,
    args: ToolInput<ToolNamed<Tools, Name>>,
    options?: CallOptions,
  ): Promise<ToolOutput<ToolNamed<Tools, Name>>>;
}

/** `TypedToolSet` when every tool's name is a literal; the untyped `ToolSet` when any is just `string`. */
export type ToolSetOf<Tools extends AnyTool> = [Tools] extends [never]
  ? ToolSet
  : string extends Tools["name"]
    ? ToolSet
    : TypedToolSet<Tools>;

/**
 * Builds a tool set. A duplicate name is refused naming both definitions' sources; so is a pair of
 * names whose model-safe forms collide. Tools defined in code give a `TypedToolSet`; tools typed only
 * as `AnyTool` (loaded at run time) give the untyped `ToolSet`.
 */
export function createToolSet<const Tools extends readonly AnyTool[]>(
  tools: Tools,
  options: ToolSetOptions = {},
): ToolSetOf<Tools[number]> {
  const byName = new Map<string, AnyTool>();
  const byLlmName = new Map<string, string>();
  const llmNames = new Map<string, string>();
  for (const tool of tools) {
    const existing = byName.get(tool.name);
    if (existing !== undefined) {
      throw new ToolDefinitionError(
        "duplicate_tool",
        `Duplicate tool name "${tool.name}": defined at ${existing.source} and at ${tool.source}`,
        { name: tool.name, sources: [existing.source, tool.source] },
      );
    }
    const llmName = toLlmName(tool.name);
    const clash = byLlmName.get(llmName);
    if (clash !== undefined || !llmNamePattern.test(llmName)) {
      throw new ToolDefinitionError(
        "duplicate_tool",
        `Tool "${tool.name}" (${tool.source}) maps to the model name "${llmName}", already used by "${clash}" (${byName.get(clash ?? "")?.source})`,
        { name: tool.name, llmName, sources: [byName.get(clash ?? "")?.source, tool.source] },
      );
    }
    byName.set(tool.name, tool);
    byLlmName.set(llmName, tool.name);
    llmNames.set(tool.name, llmName);
  }
  const names = [...byName.keys()];
  const defaultTimeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const defaultLogger = options.logger ?? silentLogger;
  const strays = createStrayRuns(options.maxStrayRuns);

  async function call(name: string, args: unknown, callOptions: CallOptions = {}): Promise<ToolCallResult> {
    const tool = byName.get(name);
    if (tool === undefined) return { ok: false, error: new UnknownToolError(name, names) };
    const callId = callOptions.callId ?? randomUUID();
    // No OpenTelemetry SDK: the span would be a no-op, so none is built.
    const defaults = { timeoutMs: defaultTimeout, logger: defaultLogger, strays };
    if (tracingIsOff()) return runTool(tool, args, callId, callOptions, defaults);
    return traceToolCall({ name, description: tool.description, callId }, async (span) => {
      const result = await runTool(tool, args, callId, callOptions, defaults);
      if (!result.ok) recordFailure(span, result.error);
      return result;
    });
  }

  const toolset: ToolSet = {
    tools: Object.freeze([...byName.values()]),
    names: Object.freeze(names),
    get: (name: string) => byName.get(name),
    has: (name: string) => byName.has(name),
    llmName(name: string) {
      const llmName = llmNames.get(name);
      if (llmName === undefined) throw new UnknownToolError(name, names);
      return llmName;
    },
    fromLlmName: (llmName: string) => byLlmName.get(llmName),
    call,
    async invoke(name: string, args: unknown, callOptions?: CallOptions) {
      const result = await call(name, args, callOptions);
      if (!result.ok) throw result.error;
      return result.output;
    },
  };
  return Object.freeze(toolset) as ToolSetOf<Tools[number]>;
}

/** What a set gives each of its calls. */
interface SetDefaults {
  readonly timeoutMs: number;
  readonly logger: Logger;
  readonly strays: StrayRuns;
}

async function runTool(
  tool: AnyTool,
  args: unknown,
  callId: string,
  options: CallOptions,
  defaults: SetDefaults,
): Promise<ToolCallResult> {
  const name = options.calledAs ?? tool.name;
  const refused = defaults.strays.refusal(tool.name, name);
  if (refused !== undefined) return { ok: false, error: refused };
  let input: ValidationResult<unknown>;
  try {
    const checked = validateNow(tool.input, args);
    input = checked instanceof Promise ? await checked : checked;
  } catch (error) {
    return { ok: false, error: schemaThrew(name, error, "input") };
  }
  if (!input.ok) return { ok: false, error: new InvalidInputError(name, input.issues) };

  const timeoutMs = options.timeoutMs ?? tool.timeoutMs ?? defaults.timeoutMs;
  const callerSignal = options.signal;
  if (callerSignal?.aborted) return { ok: false, error: new ToolAbortedError(name, callerSignal.reason) };
  // A limit already spent (a caller's remaining budget gone below zero, or not a number at all) ends
  // the call before the tool runs; only 0 and Infinity mean no limit (ADR 0566).
  if (!(timeoutMs >= 0)) return { ok: false, error: new ToolTimeoutError(name, 0) };
  // One controller for the tool's signal, aborted by its deadline or by the caller's signal (a listener,
  // not AbortSignal.any, which costs far more per call).
  const controller = new AbortController();
  const signal = controller.signal;

  const context: ToolContext = {
    signal,
    callId,
    idempotencyKey: options.idempotencyKey ?? callId,
    logger: options.logger ?? defaults.logger,
    progress: (progress, total, message) => {
      if (options.onProgress === undefined || signal.aborted) return;
      options.onProgress({
        progress,
        ...(total === undefined ? {} : { total }),
        ...(message === undefined ? {} : { message }),
      });
    },
    progressWanted: options.onProgress !== undefined,
    ...(options.identity === undefined ? {} : { identity: options.identity }),
    ...(options.client === undefined ? {} : { client: options.client }),
    ...(options.takeover === undefined ? {} : { takeover: options.takeover }),
  };

  // A tool that answers synchronously (a computation) cannot be stopped while it runs anyway: its
  // answer is taken as it is, without setting up the race below.
  let answer: unknown;
  try {
    answer =
      options.takeover !== undefined && tool.recover !== undefined
        ? recoverOrExecute(tool, input.value, context)
        : tool.execute(input.value, context);
  } catch (error) {
    if (isControlFlow(error)) throw error;
    return { ok: false, error: toToolError(name, error) };
  }
  if (!isPromiseLike(answer)) return checkOutput(tool, name, answer);
  const pending = answer;

  // The handler races its own deadline and the caller's signal: a tool that ignores its signal still
  // returns on time. The first to happen answers; timers due the same millisecond run in the order
  // they were set, so a caller's abort or a handler timed for the deadline's millisecond wins over the
  // deadline, set last (test/call-lifecycle.property.test.ts).
  let deadline: Deadline | undefined;
  let timedOut: ToolTimeoutError | undefined;
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<ToolCallResult>((resolve) => {
    if (Number.isFinite(timeoutMs) && timeoutMs > 0) {
      deadline = startDeadline(timeoutMs, () => {
        timedOut = new ToolTimeoutError(name, timeoutMs);
        resolve({ ok: false, error: timedOut });
        controller.abort(timedOut);
      });
    }
    if (callerSignal !== undefined) {
      onAbort = () => {
        resolve({ ok: false, error: new ToolAbortedError(name, callerSignal.reason) });
        controller.abort(callerSignal.reason);
      };
      callerSignal.addEventListener("abort", onAbort, { once: true });
    }
  });
  let settled = false;
  const ran = (async (): Promise<ToolCallResult> => {
    try {
      return { ok: true, output: await pending };
    } catch (error) {
      if (isControlFlow(error)) throw error;
      if (timedOut !== undefined) return { ok: false, error: toToolError(name, timedOut) };
      return { ok: false, error: toToolError(name, error) };
    } finally {
      settled = true;
    }
  })();
  try {
    const result = await Promise.race([ran, stopped]);
    // Answered by the deadline or the caller while the handler runs on: a stray run until it ends.
    if (!settled) defaults.strays.track(tool.name, name, ran, options.logger ?? defaults.logger);
    return result.ok ? await checkOutput(tool, name, result.output) : result;
  } finally {
    deadline?.clear();
    if (onAbort !== undefined) callerSignal?.removeEventListener("abort", onAbort);
  }
}

/** The longest wait one Node timer holds (2^31 − 1 ms, about 24.8 days): a longer one fires after 1 ms. */
const longestTimerMs = 2 ** 31 - 1;

interface Deadline {
  clear(): void;
}

/**
 * Calls `onDeadline` once `ms` (finite, > 0) have passed. A wait past the longest one timer holds is
 * waited in steps of that longest: handed to `setTimeout` whole, a 30-day limit would end the call
 * after 1 ms.
 */
function startDeadline(ms: number, onDeadline: () => void): Deadline {
  let timer: NodeJS.Timeout;
  const wait = (left: number): void => {
    timer = setTimeout(
      () => (left > longestTimerMs ? wait(left - longestTimerMs) : onDeadline()),
      Math.min(left, longestTimerMs),
    );
  };
  wait(ms);
  return { clear: () => clearTimeout(timer) };
}

/** On a takeover: the earlier run's output when its effect landed, else the tool run now. */
async function recoverOrExecute(tool: AnyTool, input: unknown, context: ToolContext): Promise<unknown> {
  const recovered = await tool.recover?.(input, context);
  return recovered?.landed === true ? recovered.output : tool.execute(input, context);
}

/** The tool's output, checked against its output schema when it has one. */
function checkOutput(tool: AnyTool, name: string, value: unknown): ToolCallResult | Promise<ToolCallResult> {
  if (tool.output === undefined) return { ok: true, output: value };
  const toResult = (output: ValidationResult<unknown>): ToolCallResult =>
    output.ok
      ? { ok: true, output: output.value }
      : { ok: false, error: new InvalidOutputError(name, output.issues) };
  const failed = (error: unknown): ToolCallResult => ({
    ok: false,
    error: schemaThrew(name, error, "output"),
  });
  try {
    const validated = validateNow(tool.output, value);
    return validated instanceof Promise ? validated.then(toResult, failed) : toResult(validated);
  } catch (error) {
    return failed(error);
  }
}

/**
 * A schema that threw instead of answering: a value nested past the stack (a recursive schema walks
 * it) is refused as invalid, naming the depth; anything else a refine or transform threw is the
 * tool's own failure. Either way a coded error, never an exception out of `call`.
 */
function schemaThrew(name: string, error: unknown, side: "input" | "output"): ToolError {
  if (!(error instanceof RangeError && /call stack/i.test(error.message))) return toToolError(name, error);
  const issues = [
    { path: [], message: `The ${side === "input" ? "arguments nest" : "output nests"} too deeply to check` },
  ];
  return side === "input" ? new InvalidInputError(name, issues) : new InvalidOutputError(name, issues);
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}
