/** The mesh client's public shapes: its options, what a call and a listing take, and `MeshClient`. */
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger, ToolCallResult, ToolProgress } from "@tackle/core";
import type { EventLogLevel } from "../nats/call-events.ts";
import type { ModuleInfo } from "../runtime/module-info.ts";
import type { NodeWatchOptions } from "./node-watch.ts";
import type { RetryOverloadedOptions } from "./retry-overloaded.ts";

export interface MeshCallOptions {
  /**
   * The call's time limit (default: the client's `timeoutMs`), counted from its first send: it covers
   * the wait in a node's line, the tool's run and any send again of an `overloaded` refusal (ADR 0215).
   */
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  /** Give the same key when retrying a call that may have run (a `disconnected` failure). */
  readonly idempotencyKey?: string;
  readonly callId?: string;
  /**
   * The tool's progress reports, carried across NATS while the call runs. Given only by a caller that
   * wants them: it costs an inbox subscription for the call.
   */
  readonly onProgress?: (update: ToolProgress) => void;
  /** Receives the tool's log lines at or above `logLevel` (both needed; without a level none cross). */
  readonly logger?: Logger;
  readonly logLevel?: EventLogLevel;
}

/** A listing's options: aborting `signal` rejects it with `aborted` (`ToolAbortedError`) at once. */
export interface MeshListOptions {
  readonly signal?: AbortSignal | undefined;
}

export interface MeshClient {
  /**
   * Every module the mesh holds (the catalogue) or that answers on the bus, each with its status.
   * Bounded: the catalogue read (1.5 s), discovery (`discoveryMs`) and each module's listing (2 s).
   */
  catalogue(options?: MeshListOptions): Promise<ModuleInfo[]>;
  /** What one module serves; `unreachable` when nothing answers for it within 2 s. */
  tools(module: string, options?: MeshListOptions): Promise<ModuleInfo>;
  /**
   * Calls `module.tool`; every failure comes back as `{ ok: false, error }`, an abort as `aborted` at
   * once (a signal aborted before the call sends nothing; one aborted after asks the node to cancel).
   */
  call(name: string, args: unknown, options?: MeshCallOptions): Promise<ToolCallResult>;
  /** Calls a seat's verb where the membership put it. */
  callSeat(seat: string, verb: string, args: unknown, options?: MeshCallOptions): Promise<ToolCallResult>;
  /** The broker as this client sees it: connected, or the error naming it. */
  broker(): BrokerStatus;
  /** The connection underneath (for membership functions). */
  readonly connection: NatsConnection;
  close(): Promise<void>;
}

export interface BrokerStatus {
  /** The broker URL(s), passwords redacted. */
  readonly url: string;
  readonly connected: boolean;
  /** Why it is not connected, naming the broker. */
  readonly error?: string;
}

export interface CreateMeshClientOptions {
  readonly servers?: string;
  readonly credsFile?: string;
  /** Use this connection; the client leaves it open on close. */
  readonly connection?: NatsConnection;
  /** How long connecting may take. Default 20 000 ms. */
  readonly connectTimeoutMs?: number;
  /** Ends the wait for the connection with `aborted` (aborted before: nothing is dialled). */
  readonly signal?: AbortSignal | undefined;
  /** Default time limit per call and per listing. Default 60 s for calls. */
  readonly timeoutMs?: number;
  /** How long `catalogue()` listens for modules answering `$SRV.INFO`. Default 250 ms. */
  readonly discoveryMs?: number;
  /**
   * How a call held by a node that died fails `node_lost` before its deadline: each module with calls
   * in flight is asked every `probeMs` (500) which calls its nodes hold; a holder silent for
   * `lostAfterMs` (2500) loses its calls. `false` turns it off (such calls then wait their deadline).
   */
  readonly nodeWatch?: NodeWatchOptions | false;
  /**
   * How a call a node refused `overloaded` is sent again (ADR 0215). A node refuses a call past its
   * module's running and waiting calls before reading the arguments (ADR 0214), so the call did not
   * run; the client sends it again, within the call's own time limit, up to `attempts` sends in all
   * (default 6), waiting between them a jittered, doubling time (the first between 5 and 10 ms by
   * default: half `initialDelayMs` to `initialDelayMs`, the range doubling up to `maxDelayMs`, 250).
   * A retry goes to the module's queue group again, so it may reach another node or the same one.
   * No other error is sent again (a `timeout` or `tool_failed` may have run), nor a tool's own
   * `overloaded` error. When the sends are spent, or the time limit leaves no room for another, the
   * caller gets the last `overloaded`, with `data.attempts` saying how many were sent. `false` sends
   * nothing again: the first refusal is the caller's.
   *
   * The client's retries of its calls to one module come out of that module's budget (ADRs 0216,
   * 0217, Finagle's retry budget): each call sent to the module earns `budget.ratio` of a retry (0.2)
   * and the module's budget earns `budget.minRetriesPerSecond` (10) besides, within `budget.windowMs`
   * (10 s). A call refused now and then gets all its retries; a client flooding a full module sends it
   * again at most a fifth of its calls plus 100 every 10 s, not five retries each, and its calls to
   * other modules keep their retries. Once a module's budget is spent a refusal is the caller's at
   * once, `overloaded` and retryable as the node answered it, with `data.retryBudgetSpent: true`.
   * At most 1,024 modules have a budget of their own at once (an idle one gives its place up); past
   * that, the modules share one. `budget: false` leaves the retries unbudgeted.
   */
  readonly retryOverloaded?: RetryOverloadedOptions | false;
}
