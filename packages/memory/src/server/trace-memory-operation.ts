/** One OpenTelemetry span per API operation, `memory.<operation>`; a no-op when no SDK is registered. */
import { type Attributes, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { ToolError } from "@tackle/core";

const tracer = trace.getTracer("@tackle/memory", "0.1.0");

export function traceMemoryOperation<T>(
  operation: string,
  attributes: Attributes,
  run: () => Promise<T>,
): Promise<T> {
  return tracer.startActiveSpan(
    `memory.${operation}`,
    { kind: SpanKind.SERVER, attributes: { "memory.operation": operation, ...attributes } },
    async (span) => {
      try {
        const result = await run();
        const results = (result as { results?: unknown[] } | undefined)?.results;
        if (Array.isArray(results)) span.setAttribute("memory.result_count", results.length);
        return result;
      } catch (error) {
        span.setAttribute("error.type", ToolError.isInstance(error) ? error.code : "internal");
        span.setStatus({
          code: SpanStatusCode.ERROR,
          message: error instanceof Error ? error.message : String(error),
        });
        throw error;
      } finally {
        span.end();
      }
    },
  );
}
