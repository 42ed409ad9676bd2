/** One OpenTelemetry span per tool call, `execute_tool {name}`, with the GenAI semantic-convention attributes. */
import {
  INVALID_SPAN_CONTEXT,
  ProxyTracerProvider,
  propagation,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import { isControlFlow } from "../errors/control-flow.ts";
import { ToolError } from "../errors/tool-error.ts";

const tracer = trace.getTracer("@tackle/core", "0.1.0");
/** What the global provider delegates to while no OpenTelemetry SDK is registered. */
const noopProvider = new ProxyTracerProvider().getDelegate();
const noopSpan = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/**
 * True while no OpenTelemetry SDK is registered (no tracer provider, no propagator): a span would be a
 * no-op, so the call runs without building one and its context. Checked per call, so an SDK registered
 * later is used from then on.
 */
export function tracingIsOff(): boolean {
  const provider = trace.getTracerProvider();
  return (
    provider instanceof ProxyTracerProvider &&
    provider.getDelegate() === noopProvider &&
    propagation.fields().length === 0
  );
}

export interface ToolSpanFacts {
  readonly name: string;
  readonly description: string;
  readonly callId: string;
}

/** Runs `fn` inside the span; a no-op span when no OpenTelemetry SDK is registered. */
export function traceToolCall<T>(facts: ToolSpanFacts, fn: (span: Span) => Promise<T>): Promise<T> {
  if (tracingIsOff()) return fn(noopSpan);
  return tracer.startActiveSpan(
    `execute_tool ${facts.name}`,
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": facts.name,
        "gen_ai.tool.description": facts.description,
        "gen_ai.tool.call.id": facts.callId,
        "gen_ai.tool.type": "function",
      },
    },
    async (span) => {
      try {
        return await fn(span);
      } catch (error) {
        // An interrupt is a pause, not a failure: the span ends clean.
        if (!isControlFlow(error)) recordFailure(span, error);
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

/** Marks a span failed with `error.type` set to the Tackle error code. */
export function recordFailure(span: Span, error: unknown): void {
  const code = ToolError.isInstance(error) ? error.code : "tool_failed";
  span.setAttribute("error.type", code);
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: error instanceof Error ? error.message : String(error),
  });
}
