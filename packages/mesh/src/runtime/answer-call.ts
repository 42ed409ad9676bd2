/**
 * Answering one tool call on a serving node: a late request its caller was told was never delivered is
 * refused (ADR 0208); any other runs (once across the module's nodes under an idempotency key, ADR
 * 0210) and is answered with its output or its error, and the ledger records how it ended.
 */
import { randomUUID } from "node:crypto";
import type { ServiceMsg } from "@nats-io/services";
import { headers, type NatsConnection } from "@nats-io/transport-node";
import { type Logger, ToolAbortedError, ToolError, type ToolTakeover, ToolTimeoutError } from "@tackle/core";
import { jsonText, notJsonOutput } from "@tackle/core/internal";
import type { LoadedModule } from "../bundles/load-modules.ts";
import { publishCallEvents } from "../nats/call-events.ts";
import { failSpan, traceProcess } from "../nats/trace-messaging.ts";
import {
  ALIVE_VERB,
  callIdHeader,
  decodeJson,
  encodeJson,
  errorCodeHeader,
  idempotencyKeyHeader,
  maxPayloadOf,
  notRunHeader,
  payloadTooLarge,
  serviceStatus,
  timeoutHeader,
} from "../nats/wire.ts";
import type { Admission } from "./admission.ts";
import type { CallLedger } from "./call-ledger.ts";
import { keyedRun, reportTakeover } from "./keyed-call.ts";
import type { KeyedOutcome, ResultsLedger } from "./keyed-once.ts";

/** What answering a call needs of the module it belongs to. */
export interface CallSite {
  readonly connection: NatsConnection;
  readonly loaded: LoadedModule;
  readonly logger: Logger;
  readonly running: Map<string, AbortController>;
  readonly ledger: CallLedger;
  /** The placement's subject prefix. */
  readonly prefix: string;
  /** This node process's random id (its alive subject). */
  readonly instance: string;
  /** The module's results by idempotency key, across its nodes (ADR 0210). */
  readonly results: ResultsLedger | undefined;
  /** How many of the module's calls run at once and wait (ADR 0214), across its placements. */
  readonly admission?: Admission;
}

export async function answer(site: CallSite, tool: string, message: ServiceMsg): Promise<void> {
  const { loaded, logger, ledger } = site;
  // A request this node told its caller it never saw, arriving late: it must not run (ADR 0208).
  if (message.reply !== undefined && ledger.isDisowned(message.reply)) {
    logger.warn("late request refused: its caller was told it was not delivered", {
      module: loaded.module,
      tool,
    });
    respondError(
      message,
      new ToolError(
        "not_delivered",
        `"${loaded.module}.${tool}" arrived after its caller was told it had not been delivered; it did not run`,
        { retryable: true, data: { tool: `${loaded.module}.${tool}` } },
      ),
    );
    return;
  }
  await traceProcess(message.subject, message.headers as never, async (span) => {
    const failure = await run(site, tool, message);
    if (failure !== undefined) failSpan(span, failure.code, failure.message);
  });
}

/**
 * Admits the call (ADR 0214: it waits its turn past the module's concurrent calls, or is refused past
 * the waiting ones), runs it and replies; returns the error it answered with, if any. A waiting call is
 * in `running`, so a caller asking which calls this node holds finds it, and a cancel takes it out.
 */
async function run(site: CallSite, tool: string, message: ServiceMsg): Promise<ToolError | undefined> {
  const { loaded, running, ledger, admission } = site;
  const name = `${loaded.module}.${tool}`;
  const given = message.headers?.get(callIdHeader);
  // A call id names one call: a second under an id running here would take its place in `running`, and
  // the first one's end would drop it, so a caller asking would be told it is not held (node_lost).
  if (given && running.has(given)) {
    const refused = respondError(message, callIdInUse(name, given));
    if (message.reply !== undefined && message.reply !== "") ledger.finished(message.reply, refused.code);
    return refused;
  }
  const cancel = new AbortController();
  // Calls without an id (a raw NATS client) are still registered, so a close stops them too.
  const callId = given || randomUUID();
  running.set(callId, cancel);
  /** What the call was answered with, for the ledger. */
  let failure: ToolError | undefined;
  // The caller's time limit covers the wait too: a call leaves the line when it is spent, and runs
  // with what is left of it.
  const header = Number(message.headers?.get(timeoutHeader));
  const timeoutMs = Number.isFinite(header) && header > 0 ? header : undefined;
  const arrived = performance.now();
  try {
    const admitted = admission === undefined ? "admitted" : await admission.admit(cancel.signal, timeoutMs);
    if (admitted === "full")
      failure = respondError(message, overloaded(loaded.module, tool, admission!), { notRun: true });
    else if (admitted === "aborted")
      failure = respondError(message, new ToolAbortedError(name, cancel.signal.reason));
    else if (admitted === "expired")
      failure = respondError(message, new ToolTimeoutError(name, timeoutMs ?? 0));
    else {
      const left =
        timeoutMs === undefined
          ? undefined
          : Math.max(1, Math.round(timeoutMs - (performance.now() - arrived)));
      try {
        failure = await runAdmitted(site, tool, message, { callId, cancel, timeoutMs: left });
      } finally {
        admission?.release();
      }
    }
    return failure;
  } finally {
    running.delete(callId);
    // In the same turn as leaving `running` (and after the reply went out), so a caller asking finds
    // the call in one or the other: one whose reply was lost learns that it ran (ADR 0208).
    if (message.reply !== undefined && message.reply !== "")
      ledger.finished(message.reply, failure?.code ?? "ok");
  }
}

/** A call under an id another call of the module is running under on this node: it did not run. */
function callIdInUse(name: string, callId: string): ToolError {
  return new ToolError(
    "invalid_request",
    `"${name}" was refused: a call with the call id ${JSON.stringify(callId.slice(0, 200))} is already running on this node; it did not run (give each call its own id)`,
    { retryable: false, data: { tool: name, callId: callId.slice(0, 200) } },
  );
}

/** The refusal of a call past the module's running and waiting calls on this node: retryable. */
function overloaded(module: string, tool: string, admission: Admission): ToolError {
  const { concurrent, waiting } = admission.limits;
  return new ToolError(
    "overloaded",
    `"${module}.${tool}" was refused: this node runs ${concurrent} of the module's calls at once and ${waiting} more are waiting; try again later or on another node`,
    { retryable: true, data: { tool: `${module}.${tool}`, concurrent, waiting } },
  );
}

/** Runs an admitted call and replies; returns the error it answered with, if any. */
async function runAdmitted(
  site: CallSite,
  tool: string,
  message: ServiceMsg,
  call: { readonly callId: string; readonly cancel: AbortController; readonly timeoutMs: number | undefined },
): Promise<ToolError | undefined> {
  const { callId, cancel, timeoutMs: timeout } = call;
  const { connection, loaded, logger, prefix } = site;
  let failure: ToolError | undefined;
  try {
    let args: unknown;
    try {
      args = decodeJson(message.data) ?? {};
    } catch (error) {
      failure = respondError(
        message,
        new ToolError(
          "invalid_request",
          `The arguments for "${loaded.module}.${tool}" are not JSON: ${(error as Error).message}`,
        ),
      );
      return failure;
    }
    const idempotencyKey = message.headers?.get(idempotencyKeyHeader);
    // Only a caller that named an events inbox gets progress and log lines; a plain call gets nothing more.
    const events = publishCallEvents(connection, message.headers as never, logger, message.reply, prefix);
    const execute = async (takeover?: ToolTakeover): Promise<KeyedOutcome> => {
      // On a takeover the tool is told so, and asked for the earlier run's outcome when it can tell.
      if (takeover !== undefined)
        reportTakeover(logger, loaded.module, loaded.toolset.get(tool), tool, takeover);
      const called = await loaded.toolset.call(tool, args, {
        ...(takeover === undefined ? {} : { takeover }),
        callId,
        calledAs: `${loaded.module}.${tool}`,
        ...(idempotencyKey ? { idempotencyKey } : {}),
        signal: cancel.signal,
        ...(timeout === undefined ? {} : { timeoutMs: timeout }),
        ...(events?.onProgress === undefined ? {} : { onProgress: events.onProgress }),
        ...(events?.logger === undefined ? {} : { logger: events.logger }),
      });
      return called.ok ? { ok: true, output: called.output } : { ok: false, error: called.error };
    };
    // A call under an idempotency key runs once across the module's nodes (ADR 0210); one without runs.
    const result =
      idempotencyKey && site.results !== undefined
        ? await keyedRun(
            { module: loaded.module, logger, alive: `${prefix}.${ALIVE_VERB}.${site.instance}` },
            site.results,
            { tool, key: idempotencyKey, args, timeout: timeout ?? Number.NaN, signal: cancel.signal },
            execute,
          )
        : await execute();
    events?.finish();
    if (!result.ok) {
      failure = respondError(message, result.error);
      return failure;
    }
    // A BigInt, a cycle, nesting past the stack: the tool's bug, named as core's adapters name it.
    const json = jsonText(result.output);
    if (!json.ok) {
      failure = respondError(message, notJsonOutput(`${loaded.module}.${tool}`, json.reason));
      return failure;
    }
    const body = new TextEncoder().encode(json.text);
    const limit = maxPayloadOf(connection);
    // Headers and the subject ride along in the same message; keep a margin for them.
    if (body.length > limit - 4096) {
      failure = respondError(
        message,
        payloadTooLarge("a result", `${loaded.module}.${tool}`, body.length, limit),
      );
      return failure;
    }
    message.respond(body);
    return undefined;
  } catch (error) {
    // A control-flow throw cannot cross a wire; it is reported, never dropped.
    logger.error("tool call escaped its tool set", {
      module: loaded.module,
      tool,
      error: (error as Error)?.message,
    });
    failure = respondError(
      message,
      new ToolError("tool_failed", `Tool "${tool}" failed: ${(error as Error)?.message ?? String(error)}`),
    );
    return failure;
  }
}

function respondError(message: ServiceMsg, error: ToolError, options: { notRun?: true } = {}): ToolError {
  // The services API carries the status and description in its headers; the body keeps the full error.
  const errorHeaders = headers();
  // A tool's own code may hold a line break, which no header can: the body keeps it whole.
  errorHeaders.set(errorCodeHeader, oneLine(error.code));
  // Only the node's own refusal before the call read its arguments: the caller may send it again.
  if (options.notRun === true) errorHeaders.set(notRunHeader, error.code);
  message.respondError(serviceStatus(error.code), oneLine(error.message), encodeJson(error.toJSON()), {
    headers: errorHeaders as never,
  });
  return error;
}

/** A header value cannot hold a line break. */
function oneLine(text: string): string {
  return text.replace(/[\r\n]+/g, " ").slice(0, 1000);
}
