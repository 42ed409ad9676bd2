/**
 * One module on the bus: a NATS service (the services API gives `$SRV.PING/INFO/STATS`) with an
 * endpoint per tool on the module's prefix, one per held seat's verb on the seat's subject, and `tools`.
 */
import { randomUUID } from "node:crypto";
import { type Service, Svcm } from "@nats-io/services";
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import type { Logger } from "@tackle/core";
import { toLlmName } from "@tackle/core/internal";
import type { LoadedModule } from "../bundles/load-modules.ts";
import {
  ALIVE_VERB,
  encodeJson,
  HELD_VERB,
  type HeldAnswer,
  type HeldQuestion,
  SERVING_VERB,
  type ServingNotice,
} from "../nats/wire.ts";
import { type Admission, createAdmission } from "./admission.ts";
import { answer, type CallSite } from "./answer-call.ts";
import { type CallLedger, createCallLedger } from "./call-ledger.ts";
import { describeModule, type ModuleInfo } from "./module-info.ts";
import type { ResultsLedger } from "./results-ledger.ts";

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

/** Who serves the module and what it shares across its placements. */
export interface ServeModuleOptions {
  readonly node: string;
  readonly logger: Logger;
  /**
   * The module's calls in flight, by call id, shared across its placements: a cancel or the
   * runtime's close aborts them (one controller per call; no AbortSignal.any on a long-lived signal,
   * which costs dearly at high call rates). A new map by default.
   */
  readonly running?: Map<string, AbortController>;
  /** This node process's random id, in its answers on `<prefix>.tools.held`. */
  readonly instance?: string;
  /** What the module's finished and disowned calls were, shared across its placements (ADR 0208). */
  readonly ledger?: CallLedger;
  /** The module's results by idempotency key (ADR 0210); without it a keyed call simply runs. */
  readonly results?: ResultsLedger;
  /** How many of the module's calls run at once and wait (ADR 0214); the default limits by default. */
  readonly admission?: Admission;
}

export async function serveModule(
  connection: NatsConnection,
  loaded: LoadedModule,
  placement: Placement,
  options: ServeModuleOptions,
): Promise<ServedModule> {
  const { node, logger, results } = options;
  const running = options.running ?? new Map<string, AbortController>();
  const instance = options.instance ?? processInstance;
  const ledger = options.ledger ?? createCallLedger();
  const info = describeModule(loaded, { node, prefix: placement.prefix, seats: placement.seats });
  const reconnects = reconnectCounter(connection);
  // @nats-io/services is built on its own copy of nats-core; the connection is the same object at run time.
  const service: Service = await new Svcm(connection as never).add({
    name: loaded.module,
    version: SERVICE_VERSION,
    description: `tackle mesh module ${loaded.module} on ${node}`,
    metadata: { tackle: "mesh", module: loaded.module, node, prefix: placement.prefix },
  });
  const site: CallSite = {
    connection,
    loaded,
    logger,
    running,
    ledger,
    prefix: placement.prefix,
    instance,
    results,
    admission: options.admission ?? createAdmission(),
  };
  const cancels = listenForCancels(site);
  const held = answerHeldQuestions(site, node, reconnects);
  // Asked only when this node has gone silent: its subscription lasts as long as its connection (and
  // its held answers), so "no responders" tells a caller it is gone, and silence that it is busy.
  const alive = connection.subscribe(`${placement.prefix}.${ALIVE_VERB}.${instance}`, {
    callback: (error, message) => {
      if (error === null && message.reply !== undefined && message.reply !== "") message.respond();
    },
  });
  // Callers watching the module learn of this instance before it can take a call (ADR 0225): one it
  // takes and dies with, before it answered any question, fails node_lost instead of waiting out its
  // deadline. Written ahead of the endpoints' subscriptions, on the same connection.
  const notice: ServingNotice = { prefix: placement.prefix, node, instance };
  connection.publish(`${placement.prefix}.${SERVING_VERB}`, encodeJson(notice));
  const subjects = addEndpoints(service, site, placement, encodeJson(info));
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

/** `<prefix>.tools.cancel`: a plain subscription, not a queue member, so every node serving the module hears a cancel. */
function listenForCancels(site: CallSite): Subscription {
  const { connection, running, logger, loaded } = site;
  const cancelSubject = `${site.prefix}.${CANCEL_VERB}`;
  return connection.subscribe(cancelSubject, {
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
}

/** Callers with calls in flight ask which of them this node runs, and learn from the answer that it lives. */
function answerHeldQuestions(
  site: CallSite,
  node: string,
  reconnects: { readonly count: number },
): Subscription {
  const { connection, running, ledger, logger, loaded, prefix, instance } = site;
  const heldSubject = `${prefix}.${HELD_VERB}`;
  return connection.subscribe(heldSubject, {
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
        prefix,
        node,
        instance,
        reconnects: reconnects.count,
        held: Array.isArray(callIds) ? callIds.filter((callId) => running.has(callId)) : [],
        ...(Array.isArray(question.check) ? checkCalls(question.check, running, ledger) : {}),
      };
      message.respond(encodeJson(answer));
    },
  });
}

/** The service's endpoints: `tools`, one per tool on the prefix, one per held seat's verb; returns their subjects. */
function addEndpoints(service: Service, site: CallSite, placement: Placement, listing: Uint8Array): string[] {
  const { loaded, logger } = site;
  const subjects: string[] = [];
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
  return subjects;
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
