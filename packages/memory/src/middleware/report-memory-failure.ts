/**
 * `reportMemoryFailure`: how the middleware says a call was degraded. Every failure, every time: the
 * `onError` hook, an event on an OpenTelemetry span (the caller's if any), and a log line. Nothing
 * here may throw into the model call.
 */
import { SpanStatusCode, trace } from "@opentelemetry/api";
import type { Logger } from "@tackle/core";
import type { MemoryMiddlewareError } from "./memory-middleware-error.ts";

const tracer = trace.getTracer("@tackle/memory", "0.1.0");

/** The default logger: `console.warn` with the package's prefix. */
export const consoleLogger: Pick<Logger, "warn"> = {
  warn: (message, fields) => console.warn(`[@tackle/memory] ${message}`, fields ?? {}),
};

export function reportMemoryFailure(
  error: MemoryMiddlewareError,
  logger: Pick<Logger, "warn">,
  onError: ((error: MemoryMiddlewareError) => void) | undefined,
): void {
  const phase = String((error.data as { phase?: string } | undefined)?.phase ?? "middleware");
  const attributes = {
    "memory.error.code": error.code,
    "memory.error.phase": phase,
    "memory.error.message": error.message,
  };
  const active = trace.getActiveSpan();
  if (active !== undefined) active.addEvent(error.code, attributes);
  else {
    const span = tracer.startSpan(`memory.${phase}`);
    span.addEvent(error.code, attributes);
    span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    span.end();
  }
  try {
    logger.warn(error.message, {
      code: error.code,
      phase,
      cause: describeError(error.cause),
    });
  } catch {
    // A logger that throws must not break the model call.
  }
  if (onError !== undefined) {
    try {
      onError(error);
    } catch (hookError) {
      console.warn("[@tackle/memory] onError threw while reporting a memory failure", hookError);
    }
  }
}

export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
