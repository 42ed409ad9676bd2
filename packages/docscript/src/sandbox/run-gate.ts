/**
 * The one door between a run's engine and the data behind its bindings. Every binding call of a run —
 * every read and write of `entities` and `relations` — arrives here as (capability, binding, method,
 * arguments as JSON text) and leaves as JSON text. The gate refuses, as data, a call whose capability is
 * not the run's, a call after the run ended, a binding or method the surface does not list, and
 * arguments that are not a JSON array within bounds; only then does it ask the run's data source (the
 * dispatcher). Nothing the gate answers is a function or an object of the host: only text.
 */
import type { SandboxDispatcher, SandboxFailure, SandboxSurface } from "./sandbox-protocol.ts";

/** The largest arguments text a binding call may carry (characters). */
// Above the largest payload the timeline schema allows (a transcript of 5,000 segments of 1,000 characters).
export const maxArgumentsChars = 16 * 1024 * 1024;

export interface RunGate {
  readonly capability: string;
  /** A sync binding call: the answer `{ ok, value | error }` as JSON text. */
  call(capability: string, binding: string, method: string, argumentsText: unknown): string;
  /**
   * An async binding call: `{ ok: true, callId }` at once, or a refusal; the value follows through
   * `settle` as JSON text `{ callId, ok, value | error }`, unless the run has ended by then.
   */
  callAsync(
    capability: string,
    binding: string,
    method: string,
    argumentsText: unknown,
    settle: (answerText: string) => void,
  ): string;
  /** After this, every call is refused and no answer is settled. */
  end(): void;
  readonly ended: boolean;
  /** Async calls started and not yet answered. */
  readonly inFlight: number;
  /** Async calls that were answered with a refusal, for the unobserved-rejection audit. */
  readonly rejectedCallIds: readonly number[];
  /** Sync calls the dispatcher answered (not refused), by `binding.method`: what a stopped run had done. */
  answered(): Record<string, number>;
}

function refusal(code: string, message: string): string {
  return JSON.stringify({ ok: false, error: { code, message } });
}

/** An error the dispatcher threw, as plain data (its `data` copied as JSON, or dropped). */
export function toFailure(error: unknown, fallbackCode: string): SandboxFailure {
  if (typeof error === "object" && error !== null) {
    const record = error as { code?: unknown; message?: unknown; data?: unknown };
    const code = typeof record.code === "string" ? record.code : fallbackCode;
    const message = typeof record.message === "string" ? record.message : fallbackCode;
    let data: unknown;
    try {
      data = record.data === undefined ? undefined : JSON.parse(JSON.stringify(record.data));
    } catch {
      data = undefined;
    }
    return data === undefined ? { code, message } : { code, message, data };
  }
  return { code: fallbackCode, message: typeof error === "string" ? error : fallbackCode };
}

/**
 * How deep a call's arguments may nest (arrays and objects): far above any value a schema defines, far
 * below what recursive host code (Loro's own among it) takes. Checked on the text, before it is parsed.
 */
export const maxArgumentsDepth = 64;

/**
 * Whether JSON `text` nests arrays and objects deeper than `most`: one pass over the text, outside
 * strings, without parsing it (nothing recursive ever sees a deeper value).
 */
export function nestsDeeperThan(text: string, most: number): boolean {
  let depth = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (inString) {
      if (code === 92) index++;
      else if (code === 34) inString = false;
    } else if (code === 34) inString = true;
    else if (code === 91 || code === 123) {
      if (++depth > most) return true;
    } else if (code === 93 || code === 125) depth--;
  }
  return false;
}

class PrototypeKey extends Error {}

/** Refuses `__proto__` as an object key: it would set a prototype wherever host code copies arguments by assignment. */
function noPrototypeKey(key: string, value: unknown): unknown {
  if (key === "__proto__") throw new PrototypeKey();
  return value;
}

function parseArguments(argumentsText: unknown): unknown[] | string {
  if (typeof argumentsText !== "string")
    return refusal("invalid_arguments", "arguments must cross as JSON text");
  if (argumentsText.length > maxArgumentsChars)
    return refusal(
      "arguments_too_large",
      `the call's arguments are ${argumentsText.length} characters as JSON; at most ${maxArgumentsChars}`,
    );
  if (nestsDeeperThan(argumentsText, maxArgumentsDepth))
    return refusal(
      "arguments_too_deep",
      `the call's arguments nest arrays and objects deeper than ${maxArgumentsDepth} levels`,
    );
  let args: unknown;
  try {
    // The reviver costs a call per value: only text that names the key at all pays it.
    args = argumentsText.includes('"__proto__"')
      ? JSON.parse(argumentsText, noPrototypeKey)
      : JSON.parse(argumentsText);
  } catch (error) {
    if (error instanceof PrototypeKey)
      return refusal("invalid_arguments", "arguments may not use __proto__ as an object key");
    return refusal("invalid_arguments", "arguments must be JSON");
  }
  if (!Array.isArray(args)) return refusal("invalid_arguments", "arguments must be a JSON array");
  return args;
}

function answerText(value: unknown): string {
  const text = JSON.stringify({ ok: true, value: value === undefined ? null : value });
  return text;
}

export function createRunGate(
  capability: string,
  surface: SandboxSurface,
  dispatcher: SandboxDispatcher,
): RunGate {
  let ended = false;
  let inFlight = 0;
  let nextCallId = 1;
  const rejectedCallIds: number[] = [];
  const answeredCalls = new Map<string, number>();

  const admit = (given: string, binding: string, method: string, kind: "sync" | "async") => {
    if (given !== capability)
      return refusal("capability_refused", "the call does not carry this run's capability");
    if (ended) return refusal("run_ended", "the run has ended");
    const methods = Object.hasOwn(surface, binding) ? surface[binding] : undefined;
    if (methods === undefined || !Object.hasOwn(methods, method) || methods[method] !== kind)
      return refusal("unknown_call", `${binding}.${method} is not part of the script API`);
    return undefined;
  };

  return {
    capability,
    get ended() {
      return ended;
    },
    get inFlight() {
      return inFlight;
    },
    rejectedCallIds,
    answered: () => Object.fromEntries(answeredCalls),
    end() {
      ended = true;
    },
    call(given, binding, method, argumentsText) {
      const refused = admit(given, binding, method, "sync");
      if (refused !== undefined) return refused;
      const args = parseArguments(argumentsText);
      if (typeof args === "string") return args;
      try {
        const answer = answerText(dispatcher.call(binding, method, args));
        const name = `${binding}.${method}`;
        answeredCalls.set(name, (answeredCalls.get(name) ?? 0) + 1);
        return answer;
      } catch (error) {
        return JSON.stringify({ ok: false, error: toFailure(error, "call_refused") });
      }
    },
    callAsync(given, binding, method, argumentsText, settle) {
      const refused = admit(given, binding, method, "async");
      if (refused !== undefined) return refused;
      if (dispatcher.callAsync === undefined)
        return refusal("unknown_call", `${binding}.${method} is not available`);
      const args = parseArguments(argumentsText);
      if (typeof args === "string") return args;
      const callId = nextCallId++;
      inFlight++;
      const deliver = (answer: { ok: boolean; value?: unknown; error?: SandboxFailure }) => {
        inFlight--;
        if (ended) return;
        if (!answer.ok) rejectedCallIds.push(callId);
        settle(
          answer.ok
            ? JSON.stringify({ callId, ok: true, value: answer.value === undefined ? null : answer.value })
            : JSON.stringify({ callId, ok: false, error: answer.error }),
        );
      };
      let started: Promise<unknown>;
      try {
        started = dispatcher.callAsync(binding, method, args);
      } catch (error) {
        started = Promise.reject(error);
      }
      started.then(
        (value) => deliver({ ok: true, value }),
        (error) => deliver({ ok: false, error: toFailure(error, "call_failed") }),
      );
      return JSON.stringify({ ok: true, callId });
    },
  };
}
