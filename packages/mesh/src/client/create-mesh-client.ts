/**
 * `createMeshClient`: the mesh from the caller's side: the catalogue with each module's status, one
 * module's tools, and `module.tool` calls over NATS with errors as data.
 */

import { randomUUID } from "node:crypto";
import { headers, PermissionViolationError } from "@nats-io/transport-node";
import {
  DEFAULT_TIMEOUT_MS,
  ToolAbortedError,
  type ToolCallResult,
  ToolError,
  UnknownToolError,
} from "@tackle/core";
import { defaultModulePrefix, moduleNamePattern } from "../config/names.ts";
import { redactBrokerUrl } from "../config/redact-broker-url.ts";
import { listMemberships, readCatalogue } from "../membership/membership-store.ts";
import type { CatalogueRecord } from "../membership/records.ts";
import { listenForCallEvents } from "../nats/call-events.ts";
import { connectMesh, DEFAULT_BROKER_URL } from "../nats/connect-mesh.ts";
import { failSpan, traceSend } from "../nats/trace-messaging.ts";
import {
  callIdHeader,
  decodeJson,
  encodeJson,
  idempotencyKeyHeader,
  maxPayloadOf,
  payloadTooLarge,
  timeoutHeader,
} from "../nats/wire.ts";
import type { ModuleInfo } from "../runtime/module-info.ts";
import { discoverModules } from "./discover-modules.ts";
import type {
  BrokerStatus,
  CreateMeshClientOptions,
  MeshCallOptions,
  MeshClient,
} from "./mesh-client-api.ts";
import { createNodeWatch } from "./node-watch.ts";
import { fromReply, fromRequestError } from "./reply-result.ts";
import { createRequester } from "./request-reply.ts";
import { untilAborted } from "./until-aborted.ts";

export type {
  BrokerStatus,
  CreateMeshClientOptions,
  MeshCallOptions,
  MeshClient,
  MeshListOptions,
} from "./mesh-client-api.ts";

const listingTimeoutMs = 2000;
/** How long `catalogue()` waits for the catalogue bucket before answering from what it knows. */
const catalogueReadMs = 1500;
/** How long a call waits to learn its module's prefix from the catalogue before using the default. */
const catalogueTimeoutMs = 5000;

export async function createMeshClient(options: CreateMeshClientOptions = {}): Promise<MeshClient> {
  const connection =
    options.connection ??
    (await connectMesh({
      ...(options.servers === undefined ? {} : { servers: options.servers }),
      ...(options.credsFile === undefined ? {} : { credsFile: options.credsFile }),
      ...(options.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: options.connectTimeoutMs }),
      signal: options.signal,
      name: "tackle-mesh client",
    }));
  const ownsConnection = options.connection === undefined;
  const defaultTimeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const prefixes = new Map<string, string>();
  /** Every module this client has seen, so an outage lists them `unreachable` instead of dropping them. */
  const known = new Set<string>();
  let lastCatalogue: readonly CatalogueRecord[] = [];
  const brokerUrl = redactBrokerUrl(options.servers ?? connection.getServer() ?? DEFAULT_BROKER_URL);
  let lastDisconnect: string | undefined;
  /** Call ids: this client's random prefix and a counter (unique without a random draw per call). */
  const callIdPrefix = randomUUID();
  let calls = 0;
  const nextCallId = () => `${callIdPrefix}-${(++calls).toString(36)}`;
  /**
   * Tool calls' request/reply. When the connection drops, calls in flight wait for the node watch to
   * learn their fate once it is back (ADR 0208); one whose deadline comes first fails `disconnected`.
   * Without the watch they fail at once.
   */
  const requester = createRequester(connection, {
    suspendedDeadline: (call) =>
      new ToolError(
        "disconnected",
        disconnected
          ? `"${call.name}" was in flight when the connection to NATS dropped, and the broker ${brokerUrl} is still unreachable; it may or may not have run (retry with the same idempotency key)`
          : `"${call.name}" was in flight when the connection to NATS dropped, and what became of it could not be learned by its deadline; it may or may not have run (retry with the same idempotency key)`,
        { retryable: true, data: { tool: call.name, brokerConnected: !disconnected } },
      ),
  });
  /** Which node holds each call, and whether it is still there. */
  const watch =
    options.nodeWatch === false
      ? undefined
      : createNodeWatch(
          connection,
          {
            inFlight: () => requester.inFlight(),
            isWaiting: (token) => requester.isWaiting(token),
            lost: (token, error) => requester.settle(token, error),
          },
          options.nodeWatch,
        );
  /** While reconnecting, a request would sit in the client's buffer until its timeout: it fails at once instead. */
  let disconnected = false;
  const statusWatch = (async () => {
    for await (const status of connection.status()) {
      if (status.type === "reconnect") {
        disconnected = false;
        watch?.resume();
      }
      // A publish the server refused fails its call now, as nats.js's own requests do.
      if (status.type === "error" && status.error instanceof PermissionViolationError)
        requester.refused(status.error);
      if (status.type !== "disconnect") continue;
      disconnected = true;
      watch?.pause();
      lastDisconnect = new Date().toISOString();
      const dropped = new ToolError(
        "disconnected",
        "The connection to NATS dropped while the call was in flight; it may or may not have run (retry with the same idempotency key)",
        { retryable: true },
      );
      if (watch === undefined) requester.failAll(dropped);
      else requester.suspendAll(dropped);
    }
  })().finally(() => requester.failAll(new Error("connection closed")));
  statusWatch.catch(() => undefined);

  function broker(): BrokerStatus {
    if (connection.isClosed()) {
      return {
        url: brokerUrl,
        connected: false,
        error: `The broker ${brokerUrl} is unreachable: the connection is closed`,
      };
    }
    if (!disconnected) return { url: brokerUrl, connected: true };
    return {
      url: brokerUrl,
      connected: false,
      error: `The broker ${brokerUrl} is unreachable (reconnecting since ${lastDisconnect ?? "start"})`,
    };
  }

  /** Every module this client knows of, each `unreachable` with the broker's error. */
  function brokerDown(error: string): ModuleInfo[] {
    return [...known].sort().map((module) => {
      const prefix = prefixes.get(module);
      return {
        module,
        status: "unreachable" as const,
        ...(prefix === undefined ? {} : { prefix }),
        tools: [],
        errors: [
          { source: `broker ${brokerUrl}`, message: `${error}: module "${module}" cannot be reached` },
        ],
      };
    });
  }

  async function prefixOf(module: string, refresh = false, signal?: AbortSignal): Promise<string> {
    const known = prefixes.get(module);
    if (known !== undefined && !refresh) return known;
    // While reconnecting the catalogue cannot be read; the call itself then fails at once.
    if (disconnected) return known ?? defaultModulePrefix(module);
    let prefix = defaultModulePrefix(module);
    let timer: NodeJS.Timeout | undefined;
    try {
      // A catalogue read caught by a dropped connection must not hold the call past its own deadline.
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new CatalogueDeadline()), catalogueTimeoutMs);
      });
      const read = untilAborted(readCatalogue(connection), signal, `mesh.catalogue`);
      const record = (await Promise.race([read, deadline])).find((entry) => entry.module === module);
      if (record !== undefined) prefix = record.prefix;
    } catch (error) {
      // Too slow to read: use the default prefix this once, and read the catalogue again next time.
      if (error instanceof CatalogueDeadline) return known ?? prefix;
      if (ToolAbortedError.isInstance(error)) throw error;
      // No JetStream, or no catalogue yet: the default prefix is where an unissued module answers.
    } finally {
      clearTimeout(timer);
    }
    prefixes.set(module, prefix);
    return prefix;
  }

  async function request(
    subject: string,
    args: unknown,
    callOptions: MeshCallOptions,
    name: string,
    /** The module's prefix: a cancel for this call goes to `<prefix>.tools.cancel`. */
    modulePrefix: string,
  ): Promise<ToolCallResult> {
    const timeoutMs = callOptions.timeoutMs ?? defaultTimeout;
    const callHeaders = headers();
    const callId = callOptions.callId ?? nextCallId();
    callHeaders.set(callIdHeader, callId);
    if (callOptions.idempotencyKey !== undefined)
      callHeaders.set(idempotencyKeyHeader, callOptions.idempotencyKey);
    callHeaders.set(timeoutHeader, String(timeoutMs));
    if (callOptions.signal?.aborted)
      return { ok: false, error: new ToolAbortedError(name, callOptions.signal.reason) };
    if (disconnected) {
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
        if (!disconnected) connection.publish(`${modulePrefix}.tools.cancel`, encodeJson({ callId }));
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
  }

  async function tools(module: string, signal?: AbortSignal, retried = false): Promise<ModuleInfo> {
    if (signal?.aborted) throw new ToolAbortedError(`mesh.tools`, signal.reason);
    known.add(module);
    const prefix = await prefixOf(module, false, signal);
    try {
      if (disconnected) throw new Error("not connected to NATS (reconnecting)");
      const listing = connection.request(`${prefix}.tools`, undefined, {
        timeout: Math.min(listingTimeoutMs, defaultTimeout),
      });
      const message = await untilAborted(listing, signal, "mesh.tools");
      return decodeJson(message.data) as ModuleInfo;
    } catch (error) {
      if (ToolAbortedError.isInstance(error)) throw error;
      // A membership change may have moved the module: read where it answers now, and ask there once.
      if (!retried && !disconnected && (await prefixOf(module, true, signal)) !== prefix)
        return tools(module, signal, true);
      return {
        module,
        status: "unreachable",
        prefix,
        tools: [],
        errors: [
          {
            source: `${prefix}.tools`,
            message: `no runtime answered for module "${module}": ${(error as Error).message}`,
          },
        ],
      };
    }
  }

  return {
    connection,
    broker,
    async catalogue(listOptions = {}) {
      const signal = listOptions.signal;
      if (signal?.aborted) throw new ToolAbortedError("mesh.catalogue", signal.reason);
      const before = broker();
      if (!before.connected) return brokerDown(before.error ?? "unreachable");
      const modules = new Set<string>();
      const refusals = new Map<string, NonNullable<CatalogueRecord["refused"]>>();
      let timer: NodeJS.Timeout | undefined;
      try {
        // A broker that died without the connection noticing yet must not hold the listing.
        const deadline = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new CatalogueDeadline()), catalogueReadMs);
        });
        const read = untilAborted(
          readCatalogue(connection, { onInvalid: () => {} }),
          signal,
          "mesh.catalogue",
        );
        const records = await Promise.race([read, deadline]);
        // The catalogue is the record of prefixes: a module that left it answers on its default again.
        for (const module of [...prefixes.keys()]) {
          if (!records.some((record) => record.module === module)) prefixes.delete(module);
        }
        for (const record of records) {
          modules.add(record.module);
          prefixes.set(record.module, record.prefix);
          if (record.refused !== undefined) refusals.set(record.module, record.refused);
        }
        lastCatalogue = records;
      } catch (error) {
        if (ToolAbortedError.isInstance(error)) throw error;
        // Too slow this time: the last catalogue read stands in (its modules stay listed). Without
        // JetStream there is no catalogue at all; discovery below still finds what answers.
        if (error instanceof CatalogueDeadline) {
          for (const record of lastCatalogue) {
            modules.add(record.module);
            if (record.refused !== undefined) refusals.set(record.module, record.refused);
          }
        }
      } finally {
        clearTimeout(timer);
      }
      const after = broker();
      if (!after.connected) return brokerDown(after.error ?? "unreachable");
      const discovery = discoverModules(connection, options.discoveryMs ?? 250);
      for (const module of await untilAborted(discovery, signal, "mesh.catalogue")) modules.add(module);
      const listed = await Promise.all([...modules].sort().map((module) => tools(module, signal)));
      const last = broker();
      if (!last.connected) return brokerDown(last.error ?? "unreachable");
      // A node refused for offering another bundle under the module is named beside it.
      return listed.map((info) => {
        const refused = refusals.get(info.module);
        if (refused === undefined) return info;
        const named = Object.entries(refused).map(([node, what]) => ({
          source: `node ${node}`,
          message: `node ${node} offers another bundle (${what.digest}) than the one the mesh serves${info.digest === undefined ? "" : ` (${info.digest})`}: refused, not merged`,
        }));
        return { ...info, errors: [...info.errors, ...named] };
      });
    },
    tools: (module, listOptions = {}) => tools(module, listOptions.signal),
    async call(name, args, callOptions = {}) {
      const dot = name.indexOf(".");
      const module = name.slice(0, Math.max(dot, 0));
      const tool = name.slice(dot + 1);
      if (dot <= 0 || tool === "" || !moduleNamePattern.test(module)) {
        return {
          ok: false,
          error: new ToolError("invalid_request", `"${name}" is not a mesh tool name: write module.tool`, {
            data: { name },
          }),
        };
      }
      const signal = callOptions.signal;
      // Aborted before the call: nothing is read or sent.
      if (signal?.aborted) return { ok: false, error: new ToolAbortedError(name, signal.reason) };
      let listing: ModuleInfo;
      try {
        const prefix = prefixes.get(module) ?? (await prefixOf(module, false, signal));
        const result = await request(`${prefix}.${tool}`, args, callOptions, name, prefix);
        if (result.ok || result.error.code !== "no_responders") return result;
        // Nothing answered that subject: either the tool does not exist or the module is not served.
        await prefixOf(module, true, signal);
        listing = await tools(module, signal);
      } catch (error) {
        if (ToolAbortedError.isInstance(error))
          return { ok: false, error: new ToolAbortedError(name, signal?.reason) };
        throw error;
      }
      if (listing.status === "unreachable") {
        return {
          ok: false,
          error: new ToolError(
            "unreachable",
            `Module "${module}" is unreachable: no runtime answers for it`,
            {
              retryable: true,
              data: { module },
            },
          ),
        };
      }
      if (listing.tools.some((entry) => entry.name === tool)) {
        const moved = await prefixOf(module, false, signal).catch((error: unknown) => {
          if (ToolAbortedError.isInstance(error)) return undefined;
          throw error;
        });
        if (moved === undefined) return { ok: false, error: new ToolAbortedError(name, signal?.reason) };
        return request(`${moved}.${tool}`, args, callOptions, name, moved);
      }
      return {
        ok: false,
        error: new UnknownToolError(
          name,
          listing.tools.map((entry) => `${module}.${entry.name}`),
        ),
      };
    },
    async callSeat(seat, verb, args, callOptions = {}) {
      const name = `${seat}.${verb}`;
      const signal = callOptions.signal;
      // Aborted before the call: nothing is read or sent.
      if (signal?.aborted) return { ok: false, error: new ToolAbortedError(name, signal.reason) };
      let memberships: Awaited<ReturnType<typeof listMemberships>>;
      let timer: NodeJS.Timeout | undefined;
      try {
        // A membership read caught by a dropped connection must not hold the call.
        const deadline = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new CatalogueDeadline()), catalogueTimeoutMs);
        });
        // A record that does not parse is its runtime's to report (it logs the refusal); here it holds no seat.
        const read = untilAborted(listMemberships(connection, {}, { onInvalid: () => {} }), signal, name);
        memberships = await Promise.race([read, deadline]);
      } catch (error) {
        if (ToolAbortedError.isInstance(error)) return { ok: false, error };
        if (!(error instanceof CatalogueDeadline)) throw error;
        return {
          ok: false,
          error: new ToolError(
            "unavailable",
            `The mesh's memberships could not be read within ${catalogueTimeoutMs} ms; "${name}" was not sent`,
            { retryable: true, data: { seat, verb } },
          ),
        };
      } finally {
        clearTimeout(timer);
      }
      const holder = memberships.find((record) => record.seats[seat] !== undefined);
      if (holder === undefined) {
        return {
          ok: false,
          error: new ToolError("unknown_seat", `No module holds seat "${seat}"`, { data: { seat } }),
        };
      }
      const result = await request(`${holder.seats[seat]}.${verb}`, args, callOptions, name, holder.prefix);
      if (!result.ok && result.error.code === "no_responders") {
        return {
          ok: false,
          error: new ToolError(
            "unknown_tool",
            `Seat "${seat}" (held by ${holder.module}) has no verb "${verb}" answering`,
            {
              data: { seat, verb, module: holder.module },
            },
          ),
        };
      }
      return result;
    },
    async close() {
      watch?.close();
      // A connection still dialling (a broker down, a credential revoked) has nothing to drain and
      // would wait for a reconnect that may never come: it is closed.
      if (ownsConnection)
        await (disconnected ? connection.close() : connection.drain().catch(() => connection.close()));
      requester.close();
    },
  };
}

/** The catalogue read ran past its deadline. */
class CatalogueDeadline extends Error {}
