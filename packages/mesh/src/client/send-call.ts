/** One tool call on the bus: headers, size check, request/reply under the call's deadline, abort, events. */
import { randomUUID } from "node:crypto";
import { headers } from "@nats-io/transport-node";
import { ToolAbortedError, type ToolCallResult, ToolError } from "@tackle/core";
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
import { fromReply, fromRequestError } from "./reply-result.ts";

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

export function createCallSender(link: ClientLink, defaultTimeoutMs: number): SendCall {
  const { connection, requester, watch } = link;
  /** Call ids: this client's random prefix and a counter (unique without a random draw per call). */
  const callIdPrefix = randomUUID();
  let calls = 0;
  const nextCallId = () => `${callIdPrefix}-${(++calls).toString(36)}`;

  return async (subject, args, callOptions, name, modulePrefix) => {
    const timeoutMs = callOptions.timeoutMs ?? defaultTimeoutMs;
    const callHeaders = headers();
    const callId = callOptions.callId ?? nextCallId();
    callHeaders.set(callIdHeader, callId);
    if (callOptions.idempotencyKey !== undefined)
      callHeaders.set(idempotencyKeyHeader, callOptions.idempotencyKey);
    callHeaders.set(timeoutHeader, String(timeoutMs));
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
    const body = encodeJson(args ?? {});
    const limit = maxPayloadOf(connection);
    if (body.length > limit - 4096) {
      return { ok: false, error: payloadTooLarge("arguments", name, body.length, limit) };
    }
    // The far side enforces the tool's limit; the bus waits a little longer so its timeout error arrives.
    return traceSend(subject, callHeaders, async (span) => {
      // Progress and log lines come to an inbox of this call's own, until its reply, deadline or abort.
      const events =
        callOptions.onProgress === undefined && callOptions.logLevel === undefined
          ? undefined
          : listenForCallEvents(connection, callHeaders, callOptions, modulePrefix);
      const { token, reply } = requester.start(subject, body, callHeaders, timeoutMs + 1000, {
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
            ? fromRequestError(answer, name, timeoutMs)
            : fromReply(answer);
      } finally {
        events?.close();
        signal?.removeEventListener("abort", onAbort);
      }
      if (!result.ok) failSpan(span, result.error.code, result.error.message);
      return result;
    });
  };
}
