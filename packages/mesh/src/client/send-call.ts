/**
 * One tool call on the bus: headers, size check, request/reply under the call's deadline, abort, events;
 * sent again when a node refused it `overloaded` before running it (ADR 0215).
 */
import { randomUUID } from "node:crypto";
import { headers } from "@nats-io/transport-node";
import { ToolAbortedError, type ToolCallResult, ToolError } from "@tackle/core";
import { realClock } from "@tackle/core/internal";
import { listenForCallEvents } from "../nats/call-events.ts";
import { failSpan, traceSend } from "../nats/trace-messaging.ts";
import {
  callIdHeader,
  encodeJson,
  idempotencyKeyHeader,
  maxPayloadOf,
  payloadTooLarge,
  timeoutHeader,
} from "../nats/wire.ts";
import type { ClientLink } from "./client-link.ts";
import type { MeshCallOptions } from "./mesh-client-api.ts";
import { createModuleBudgets } from "./module-budgets.ts";
import { fromReply, fromRequestError } from "./reply-result.ts";
import { isRetryableRefusal, type RetryPolicy, retryOverloaded } from "./retry-overloaded.ts";

/**
 * Sends `args` to `subject` as the call `name`; `modulePrefix` is where a cancel for it goes
 * (`<prefix>.tools.cancel`). Every failure is a result, never a throw.
 */
export type SendCall = (
  subject: string,
  args: unknown,
  callOptions: MeshCallOptions,
  name: string,
  modulePrefix: string,
) => Promise<ToolCallResult>;

/** One call as its sends share it: what is sent, where, and the caller's own time limit. */
interface Outgoing {
  readonly subject: string;
  readonly body: Uint8Array;
  readonly callOptions: MeshCallOptions;
  readonly name: string;
  readonly modulePrefix: string;
  readonly callId: string;
  /** The caller's time limit for the whole call (a retry is sent with what is left of it). */
  readonly limitMs: number;
}

/**
 * `retry`: how a call a node refused `overloaded` before running it is sent again (ADR 0215), out of
 * the budget of the module it goes to (ADRs 0216, 0217); undefined never sends again.
 */
export function createCallSender(
  link: ClientLink,
  defaultTimeoutMs: number,
  retry: RetryPolicy | undefined,
): SendCall {
  const { connection, requester, watch } = link;
  /** Call ids: this client's random prefix and a counter (unique without a random draw per call). */
  const callIdPrefix = randomUUID();
  let calls = 0;
  const nextCallId = () => `${callIdPrefix}-${(++calls).toString(36)}`;
  const budgets = retry?.budget === undefined ? undefined : createModuleBudgets(retry.budget);

  /** One send of the call, with a time limit of `timeoutMs`; its own headers, span and events inbox. */
  const sendOnce = (call: Outgoing, timeoutMs: number): Promise<ToolCallResult> => {
    const { subject, callOptions, name, modulePrefix, callId } = call;
    const callHeaders = headers();
    callHeaders.set(callIdHeader, callId);
    if (callOptions.idempotencyKey !== undefined)
      callHeaders.set(idempotencyKeyHeader, callOptions.idempotencyKey);
    callHeaders.set(timeoutHeader, String(timeoutMs));
    // The far side enforces the tool's limit; the bus waits a little longer so its timeout error arrives.
    return traceSend(subject, callHeaders, async (span) => {
      // Progress and log lines come to an inbox of this call's own, until its reply, deadline or abort.
      const events =
        callOptions.onProgress === undefined && callOptions.logLevel === undefined
          ? undefined
          : listenForCallEvents(connection, callHeaders, callOptions, modulePrefix);
      const { token, reply } = requester.start(subject, call.body, callHeaders, timeoutMs + 1000, {
        prefix: modulePrefix,
        callId,
        name,
      });
      // After the request, so a node reads the call before any question about it.
      watch?.started(modulePrefix);
      const signal = callOptions.signal;
      const onAbort = () => {
        requester.settle(token, new ToolAbortedError(name, signal?.reason));
        // The far side stops the tool too, instead of running it to its own time limit.
        if (!link.disconnected()) connection.publish(`${modulePrefix}.tools.cancel`, encodeJson({ callId }));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      let result: ToolCallResult;
      try {
        const answer = await reply;
        result = ToolError.isInstance(answer)
          ? { ok: false, error: answer }
          : answer instanceof Error
            ? fromRequestError(answer, name, call.limitMs)
            : fromReply(answer);
      } finally {
        events?.close();
        signal?.removeEventListener("abort", onAbort);
      }
      if (!result.ok) failSpan(span, result.error.code, result.error.message);
      return result;
    });
  };

  return async (subject, args, callOptions, name, modulePrefix) => {
    const timeoutMs = callOptions.timeoutMs ?? defaultTimeoutMs;
    const startedAt = performance.now();
    if (callOptions.signal?.aborted)
      return { ok: false, error: new ToolAbortedError(name, callOptions.signal.reason) };
    if (link.disconnected()) {
      return {
        ok: false,
        error: new ToolError("unavailable", `Not connected to NATS (reconnecting); "${name}" was not sent`, {
          retryable: true,
          data: { tool: name },
        }),
      };
    }
    const refused = unsendable(name, callOptions);
    if (refused !== undefined) return { ok: false, error: refused };
    let body: Uint8Array;
    try {
      body = encodeJson(args ?? {});
    } catch (error) {
      // A BigInt, a cycle, nesting past the stack: refused as a result, never thrown out of `call`.
      return {
        ok: false,
        error: new ToolError(
          "invalid_request",
          `The arguments for "${name}" are not JSON: ${(error as Error)?.message ?? String(error)}; nothing was sent`,
          { retryable: false, data: { tool: name } },
        ),
      };
    }
    const limit = maxPayloadOf(connection);
    if (body.length > limit - 4096) {
      return { ok: false, error: payloadTooLarge("arguments", name, body.length, limit) };
    }
    const callId = callOptions.callId ?? nextCallId();
    const call: Outgoing = { subject, body, callOptions, name, modulePrefix, callId, limitMs: timeoutMs };
    // Each call sent earns its share of its module's retries, whatever its answer.
    const budget = budgets?.of(modulePrefix);
    budget?.sent(realClock.now());
    const first = await sendOnce(call, timeoutMs);
    if (retry === undefined || first.ok || !isRetryableRefusal(first.error)) return first;
    // Refused before it ran: sent again, with the same call id, within what is left of the limit.
    return retryOverloaded(first, {
      policy: retry,
      deadline: startedAt + timeoutMs,
      name,
      signal: callOptions.signal,
      clock: realClock,
      random: Math.random,
      budget,
      send: (left) => (link.disconnected() || connection.isClosed() ? undefined : sendOnce(call, left)),
    });
  };
}

/** The longest idempotency key or call id sent (ADR 0224): a key names a call, it does not carry data. */
export const maxCallKeyLength = 1024;

/**
 * The call's idempotency key and call id ride in NATS headers, which cannot hold a line break: such a
 * value is refused as a result before anything is sent (nats.js would throw from inside the call), and
 * so is one longer than `maxCallKeyLength` (it counted against `max_payload` as if it were arguments).
 */
function unsendable(name: string, callOptions: MeshCallOptions): ToolError | undefined {
  for (const option of ["idempotencyKey", "callId"] as const) {
    const value: unknown = callOptions[option];
    if (value === undefined) continue;
    if (typeof value !== "string" || /[\r\n]/.test(value)) {
      return new ToolError(
        "invalid_request",
        `The ${option} of "${name}" must be a string without line breaks (it rides in a NATS header); nothing was sent`,
        { retryable: false, data: { tool: name, option } },
      );
    }
    if (value.length > maxCallKeyLength) {
      return new ToolError(
        "invalid_request",
        `The ${option} of "${name}" is ${value.length} characters, over the ${maxCallKeyLength} allowed; nothing was sent`,
        { retryable: false, data: { tool: name, option, length: value.length, limit: maxCallKeyLength } },
      );
    }
  }
  return undefined;
}
