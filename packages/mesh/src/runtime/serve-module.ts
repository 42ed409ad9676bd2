/**
 * One module on the bus: a NATS service (the services API gives `$SRV.PING/INFO/STATS`) with an
 * endpoint per tool on the module's prefix, one per held seat's verb on the seat's subject, and `tools`.
 */
import { randomUUID } from "node:crypto";
import { type Service, type ServiceMsg, Svcm } from "@nats-io/services";
import { headers, type NatsConnection } from "@nats-io/transport-node";
import { type Logger, ToolError, type ToolTakeover } from "@tackle/core";
import { toLlmName } from "@tackle/core/internal";
import type { LoadedModule } from "../bundles/load-modules.ts";
import { publishCallEvents } from "../nats/call-events.ts";
import { failSpan, traceProcess } from "../nats/trace-messaging.ts";
import {
  ALIVE_VERB,
  callIdHeader,
  decodeJson,
  encodeJson,
  errorCodeHeader,
  HELD_VERB,
  type HeldAnswer,
  type HeldQuestion,
  idempotencyKeyHeader,
  maxPayloadOf,
  payloadTooLarge,
  serviceStatus,
  timeoutHeader,
} from "../nats/wire.ts";
import { type CallLedger, createCallLedger } from "./call-ledger.ts";
import { keyedRun, reportTakeover } from "./keyed-call.ts";
import type { KeyedOutcome, ResultsLedger } from "./keyed-once.ts";
import { describeModule, type ModuleInfo } from "./module-info.ts";

export interface Placement {
  readonly prefix: string;
  readonly seats: Readonly<Record<string, string>>;
}

export interface ServedModule {
  readonly placement: Placement;
  readonly info: ModuleInfo;
  /** Every subject it answers on. */
  readonly subjects: readonly string[];
  stop(): Promise<void>;
}

export const SERVICE_VERSION = "0.1.0";

/** A random id per node process: a node restarted under its name is another instance. */
const processInstance = randomUUID();

/** `<prefix>.tools.cancel` takes `{ callId }` and aborts that call wherever it runs. */
export const CANCEL_VERB = "tools.cancel";

const reconnectCounters = new WeakMap<NatsConnection, { count: number }>();

/** How many times the connection has reconnected, counted from its status events (one watcher each). */
function reconnectCounter(connection: NatsConnection): { readonly count: number } {
  let counter = reconnectCounters.get(connection);
  if (counter === undefined) {
    const created = { count: 0 };
    counter = created;
    reconnectCounters.set(connection, created);
    void (async () => {
      for await (const status of connection.status()) if (status.type === "reconnect") created.count += 1;
    })().catch(() => undefined);
  }
  return counter;
}

export async function serveModule(
  connection: NatsConnection,
  loaded: LoadedModule,
  placement: Placement,
  node: string,
  logger: Logger,
  /**
   * The module's calls in flight, by call id, shared across its placements: a cancel or the
   * runtime's close aborts them (one controller per call; no AbortSignal.any on a long-lived signal,
   * which costs dearly at high call rates).
   */
  running: Map<string, AbortController> = new Map(),
  /** This node process's random id, in its answers on `<prefix>.tools.held`. */
  instance: string = processInstance,
  /** What the module's finished and disowned calls were, shared across its placements (ADR 0208). */
  ledger: CallLedger = createCallLedger(),
  /** The module's results by idempotency key (ADR 0210); without it a keyed call simply runs. */
  results?: ResultsLedger,
): Promise<ServedModule> {
  const info = describeModule(loaded, { node, prefix: placement.prefix, seats: placement.seats });
  const reconnects = reconnectCounter(connection);
  // @nats-io/services is built on its own copy of nats-core; the connection is the same object at run time.
  const service: Service = await new Svcm(connection as never).add({
    name: loaded.module,
    version: SERVICE_VERSION,
    description: `tackle mesh module ${loaded.module} on ${node}`,
    metadata: { tackle: "mesh", module: loaded.module, node, prefix: placement.prefix },
  });
  const subjects: string[] = [];
  const site: CallSite = {
    connection,
    loaded,
    logger,
    running,
    ledger,
    prefix: placement.prefix,
    instance,
    results,
  };
  const listing = encodeJson(info);
  const cancelSubject = `${placement.prefix}.${CANCEL_VERB}`;
  // A plain subscription, not a queue member: every node serving the module hears a cancel.
  const cancels = connection.subscribe(cancelSubject, {
    callback: (error, message) => {
      if (error !== null) return;
      try {
        const { callId } = message.json<{ callId?: unknown }>();
        if (typeof callId === "string")
          running.get(callId)?.abort(new Error("the caller cancelled the call"));
      } catch {
        logger.warn("malformed cancel message ignored", { module: loaded.module, subject: cancelSubject });
      }
    },
  });
  // Callers with calls in flight ask which of them this node runs, and learn from the answer that it lives.
  const heldSubject = `${placement.prefix}.${HELD_VERB}`;
  const held = connection.subscribe(heldSubject, {
    callback: (error, message) => {
      if (error !== null || message.reply === undefined || message.reply === "") return;
      let question: Partial<HeldQuestion>;
      try {
        question = message.json<Partial<HeldQuestion>>() ?? {};
      } catch {
        return logger.warn("malformed held question ignored", {
          module: loaded.module,
          subject: heldSubject,
        });
      }
      const callIds = question.callIds;
      const answer: HeldAnswer = {
        prefix: placement.prefix,
        node,
        instance,
        reconnects: reconnects.count,
        held: Array.isArray(callIds) ? callIds.filter((callId) => running.has(callId)) : [],
        ...(Array.isArray(question.check) ? checkCalls(question.check, running, ledger) : {}),
      };
      message.respond(encodeJson(answer));
    },
  });
  // Asked only when this node has gone silent: its subscription lasts as long as its connection (and
  // its held answers), so "no responders" tells a caller it is gone, and silence that it is busy.
  const alive = connection.subscribe(`${placement.prefix}.${ALIVE_VERB}.${instance}`, {
    callback: (error, message) => {
      if (error === null && message.reply !== undefined && message.reply !== "") message.respond();
    },
  });
  service.addEndpoint("tools", {
    subject: `${placement.prefix}.tools`,
    metadata: { description: "this module's tools, schemas and load errors" },
    handler: (error, message) => {
      if (error !== null)
        return logger.error("tools endpoint failed", { module: loaded.module, error: error.message });
      message.respond(listing);
    },
  });
  subjects.push(`${placement.prefix}.tools`);

  const endpoint = (endpointName: string, subject: string, tool: string) => {
    const definition = loaded.toolset.get(tool);
    service.addEndpoint(endpointName, {
      subject,
      metadata: {
        tool,
        description: definition?.description ?? "",
        input_schema: JSON.stringify(definition?.inputJsonSchema ?? {}),
      },
      handler: (error, message) => {
        if (error !== null)
          return logger.error("endpoint failed", { module: loaded.module, tool, error: error.message });
        void answer(site, tool, message);
      },
    });
    subjects.push(subject);
  };
  for (const tool of loaded.toolset.names) endpoint(toLlmName(tool), `${placement.prefix}.${tool}`, tool);
  for (const [seat, seatPrefix] of Object.entries(placement.seats)) {
    for (const tool of loaded.toolset.names) {
      if (!tool.startsWith(`${seat}.`)) continue;
      const verb = tool.slice(seat.length + 1);
      endpoint(`seat-${toLlmName(tool)}`, `${seatPrefix}.${verb}`, tool);
    }
  }
  // The server must hold every subscription before the caller treats the module as served.
  await connection.flush();
  return {
    placement,
    info,
    subjects,
    async stop() {
      cancels.unsubscribe();
      await service.stop();
      // A caller asks where it sent its call: calls still running from before a move (the module
      // re-served on another prefix) are claimed here until they end, or their callers would think
      // this node gone.
      const left = new Set(running.keys());
      const release = () => {
        for (const callId of left) if (!running.has(callId)) left.delete(callId);
        if (left.size === 0 || connection.isClosed()) {
          held.unsubscribe();
          alive.unsubscribe();
          return;
        }
        setTimeout(release, 500).unref();
      };
      release();
    },
  };
}

/** What answering a call needs of the module it belongs to. */
interface CallSite {
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
}

async function answer(site: CallSite, tool: string, message: ServiceMsg): Promise<void> {
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

/** The answer's part about checked calls: which finished here, and which this node now disowns. */
function checkCalls(
  check: NonNullable<HeldQuestion["check"]>,
  running: ReadonlyMap<string, AbortController>,
  ledger: CallLedger,
): Pick<HeldAnswer, "finished" | "disowned" | "rememberedMs"> {
  const wanted = new Set<string>();
  for (const entry of check) if (typeof entry?.reply === "string") wanted.add(entry.reply);
  const finished = ledger.findFinished(wanted);
  const done = new Set(finished.map((entry) => entry.reply));
  const disowned: string[] = [];
  for (const entry of check) {
    if (entry?.disown !== true || typeof entry.reply !== "string" || done.has(entry.reply)) continue;
    // Running under that id: possibly this very call, so it is not disowned (its caller waits).
    if (running.has(entry.callId)) continue;
    ledger.disown(entry.reply);
    disowned.push(entry.reply);
  }
  return { finished, disowned, rememberedMs: ledger.rememberedMs() };
}

/** Runs the call and replies; returns the error it answered with, if any. */
async function run(site: CallSite, tool: string, message: ServiceMsg): Promise<ToolError | undefined> {
  const { connection, loaded, logger, running, ledger, prefix } = site;
  const cancel = new AbortController();
  // Calls without an id (a raw NATS client) are still registered, so a close stops them too.
  const callId = message.headers?.get(callIdHeader) || randomUUID();
  running.set(callId, cancel);
  /** What the call was answered with (every return sets it), for the ledger. */
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
    const timeout = Number(message.headers?.get(timeoutHeader));
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
        ...(Number.isFinite(timeout) && timeout > 0 ? { timeoutMs: timeout } : {}),
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
            { tool, key: idempotencyKey, args, timeout, signal: cancel.signal },
            execute,
          )
        : await execute();
    events?.finish();
    if (!result.ok) {
      failure = respondError(message, result.error);
      return failure;
    }
    const body = encodeJson(result.output);
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
  } finally {
    running.delete(callId);
    // In the same turn as leaving `running` (and after the reply went out), so a caller asking finds
    // the call in one or the other: one whose reply was lost learns that it ran (ADR 0208).
    if (message.reply !== undefined && message.reply !== "")
      ledger.finished(message.reply, failure?.code ?? "ok");
  }
}

function respondError(message: ServiceMsg, error: ToolError): ToolError {
  // The services API carries the status and description in its headers; the body keeps the full error.
  const errorHeaders = headers();
  errorHeaders.set(errorCodeHeader, error.code);
  message.respondError(serviceStatus(error.code), oneLine(error.message), encodeJson(error.toJSON()), {
    headers: errorHeaders as never,
  });
  return error;
}

/** A header value cannot hold a line break. */
function oneLine(text: string): string {
  return text.replace(/[\r\n]+/g, " ").slice(0, 1000);
}
