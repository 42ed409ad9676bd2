/**
 * OpenTelemetry spans for the bus, after the messaging semantic conventions: the client's request
 * (`send <subject>`) carries its trace context in the NATS headers, and the runtime's handling
 * (`process <subject>`) continues it, so core's `execute_tool` span nests under the caller's trace.
 * Without a registered SDK these are no-ops.
 */

import type { MsgHdrs } from "@nats-io/transport-node";
import {
  context,
  INVALID_SPAN_CONTEXT,
  ProxyTracerProvider,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapSetter,
  trace,
} from "@opentelemetry/api";

const tracer = trace.getTracer("@tackle/mesh", "0.1.0");
/** What the global provider delegates to while no OpenTelemetry SDK is registered. */
const noopProvider = new ProxyTracerProvider().getDelegate();
const noopSpan = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/**
 * True while no OpenTelemetry SDK is registered (no tracer provider, no propagator): the spans and
 * headers would be no-ops, so a call skips building them. Checked per call.
 */
function tracingIsOff(): boolean {
  const provider = trace.getTracerProvider();
  return (
    provider instanceof ProxyTracerProvider &&
    provider.getDelegate() === noopProvider &&
    propagation.fields().length === 0
  );
}

const setter: TextMapSetter<MsgHdrs> = {
  set: (carrier, key, value) => carrier.set(key, value),
};

const getter: TextMapGetter<MsgHdrs | undefined> = {
  keys: (carrier) => (carrier === undefined ? [] : carrier.keys()),
  get: (carrier, key) => carrier?.get(key) || undefined,
};

function attributes(subject: string, operation: "send" | "process") {
  return {
    "messaging.system": "nats",
    "messaging.destination.name": subject,
    "messaging.operation.type": operation,
    "messaging.operation.name": operation === "send" ? "request" : "process",
  };
}

/** Marks a span failed with `error.type` set to the Tackle error code. */
export function failSpan(span: Span, code: string, message: string): void {
  span.setAttribute("error.type", code);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/** The caller's side: a span around the request whose context rides in `headers`. */
export function traceSend<T>(subject: string, headers: MsgHdrs, fn: (span: Span) => Promise<T>): Promise<T> {
  return tracingIsOff() ? fn(noopSpan) : sendSpan(subject, headers, fn);
}

async function sendSpan<T>(subject: string, headers: MsgHdrs, fn: (span: Span) => Promise<T>): Promise<T> {
  const span = tracer.startSpan(`send ${subject}`, {
    kind: SpanKind.CLIENT,
    attributes: attributes(subject, "send"),
  });
  const active = trace.setSpan(context.active(), span);
  propagation.inject(active, headers, setter);
  try {
    return await context.with(active, () => fn(span));
  } finally {
    span.end();
  }
}

/** The runtime's side: a span continuing the caller's trace from the request headers. */
export function traceProcess<T>(
  subject: string,
  headers: MsgHdrs | undefined,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  return tracingIsOff() ? fn(noopSpan) : processSpan(subject, headers, fn);
}

async function processSpan<T>(
  subject: string,
  headers: MsgHdrs | undefined,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = propagation.extract(ROOT_CONTEXT, headers, getter);
  const span = tracer.startSpan(
    `process ${subject}`,
    { kind: SpanKind.SERVER, attributes: attributes(subject, "process") },
    parent,
  );
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } finally {
    span.end();
  }
}
