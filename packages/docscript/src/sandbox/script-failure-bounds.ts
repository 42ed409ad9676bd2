/**
 * What a script may tell the host when it fails, and how much of it: codes the host gives (a limit, a
 * crash) can only come from the host, and every part of a failure is cut to a bound before the host
 * formats, counts or sends it.
 */
import type { SandboxFailure } from "./sandbox-protocol.ts";

/** Codes only the host gives: a script that throws one is reported as `script_error`. */
export const hostFailureCodes: ReadonlySet<string> = new Set([
  "timeout",
  "memory_limit",
  "sandbox_crashed",
  "sandbox_closed",
  "syntax_error",
  "unhandled_rejection",
  "capability_refused",
  "run_ended",
  "run_cancelled",
]);

/** The longest message a script's failure keeps (characters). */
export const maxFailureMessageChars = 2_000;
/** The longest `data` a script's failure keeps, as JSON text (characters); more is replaced by its size. */
export const maxFailureDataChars = 16 * 1024;
/** The longest text the script's `finish` may hand the host (its failure, described and cut). */
export const maxOutcomeChars = 64 * 1024;
/** The longest log line text the host copies out of the engine (the bridge cuts lines to 2000). */
export const maxLogCrossingChars = 4 * 1024;

const codePattern = /^[a-z][a-z0-9_]{0,63}$/;

/** A script's own failure as the host keeps it: a code it may give, a cut message, bounded data. */
export function boundScriptFailure(failure: SandboxFailure): SandboxFailure {
  const given = typeof failure.code === "string" ? failure.code : "";
  const forged = hostFailureCodes.has(given);
  const code = codePattern.test(given) && !forged ? given : "script_error";
  const rawMessage = typeof failure.message === "string" ? failure.message : "";
  let message =
    rawMessage.length <= maxFailureMessageChars
      ? rawMessage
      : `${rawMessage.slice(0, maxFailureMessageChars)}… [+${rawMessage.length - maxFailureMessageChars} chars]`;
  if (forged)
    message = `the script threw an error with code "${given}", which only the host gives: ${message}`;
  let data = failure.data;
  if (data !== undefined) {
    let text: string | undefined;
    try {
      text = JSON.stringify(data);
    } catch {
      text = undefined;
    }
    if (text === undefined) data = undefined;
    else if (text.length > maxFailureDataChars) data = { elided: true, chars: text.length };
  }
  if (given !== code && given !== "") {
    const thrownCode = given.slice(0, 64);
    data =
      typeof data === "object" && data !== null && !Array.isArray(data)
        ? { ...data, thrownCode }
        : { thrownCode };
  }
  return data === undefined ? { code, message } : { code, message, data };
}
