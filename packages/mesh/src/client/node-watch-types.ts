/** The node watch's shapes: its options, the calls it follows, and what it keeps per module and node. */
import type { ToolError } from "@tackle/core";

export interface NodeWatchOptions {
  /** How often a module with calls in flight is asked. Default 500 ms. */
  readonly probeMs?: number;
  /**
   * How long a holder may go without claiming its call before the watch asks whether its process is
   * still connected (the call fails only if it is not). Default 2500 ms.
   */
  readonly lostAfterMs?: number;
}

/** A call in flight, as the requester holds it. */
export interface CallInFlight {
  readonly token: string;
  /** The module's prefix; undefined for a request the watch does not follow. */
  readonly prefix: string | undefined;
  readonly callId: string;
  readonly name: string;
  /** Its reply subject: unique per request, so nodes remember it after the call ends (ADR 0208). */
  readonly reply: string;
  /** When it was sent (`performance.now()`). */
  readonly sentAt: number;
  /** It was in flight when the connection dropped. */
  readonly suspended: boolean;
}

/** Where the watch reads the calls in flight and settles a lost one. */
export interface WatchedCalls {
  inFlight(): Iterable<CallInFlight>;
  isWaiting(token: string): boolean;
  /** Settles the call with that token (its node is gone). */
  lost(token: string, error: ToolError): void;
}

export interface Instance {
  readonly node: string;
  /** `<prefix>.tools.alive.<instance>`, which the node process subscribes while it serves there. */
  readonly aliveSubject: string;
  lastSeen: number;
  /** A question to `aliveSubject` is out. */
  checking: boolean;
  /** It went silent and NATS answered "no responders" on `aliveSubject`: its connection is gone. */
  gone: boolean;
  /** Its connection's reconnect count, as it last said. */
  reconnects: number | undefined;
  /** When this client learned that its connection had reconnected (a request may have died with its server). */
  reconnectedAt: number;
}

export interface Watched {
  readonly token: string;
  readonly name: string;
  readonly reply: string;
  readonly sentAt: number;
  /** It was in flight when the connection dropped. */
  readonly suspended: boolean;
  /** When a question first listed it: it was sent at most one `probeMs` earlier. */
  readonly listedAt: number;
  holder: Instance | undefined;
  /** When its holder last claimed it. */
  seenAt: number;
  /** The questions ask the nodes what became of it: finished, or never seen (then disowned). */
  check: boolean;
  /** A node finished it, yet it waits: its reply was lost. */
  finished: { readonly node: string; readonly outcome: string; readonly at: number } | undefined;
  /** Nodes that never saw it and now refuse it; `true` where their memory reaches back to its send. */
  readonly disownedBy: Map<Instance, boolean>;
}

export interface ModuleWatch {
  /** Its calls that a question has listed, by call id. */
  readonly calls: Map<string, Watched>;
  readonly instances: Map<string, Instance>;
  lastUsed: number;
  /** A call started since the last tick. */
  used: boolean;
  /**
   * When a request to the module's `tools.held` last got "no responders": no connection serves the
   * module there or holds a call on it (a node re-served elsewhere keeps answering while its calls run).
   */
  emptyAt: number | undefined;
  /** That request is out. */
  checkingEmpty: boolean;
}

export interface NodeWatch {
  /** A call was just sent to the module on `prefix` (after its request was published). */
  started(prefix: string): void;
  /** The connection dropped: nothing is judged until it is back. */
  pause(): void;
  /**
   * Back: every node that was answering gets a fresh `lostAfterMs`, and the calls caught in flight are
   * checked: finished (reply lost), still running, or never delivered (ADR 0208).
   */
  resume(): void;
  close(): void;
}
