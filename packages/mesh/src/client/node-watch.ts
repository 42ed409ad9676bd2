/**
 * Which node holds a call, and whether that node is still there (ADR 0207). While a client has calls
 * on a module (and for a while after), it asks `<prefix>.tools.held` every `probeMs` with the ids of
 * its calls there; every node serving the module answers with its name, its process instance and the
 * ids it is running. A call whose holder stops claiming it for `lostAfterMs`, or that no answering
 * node claims while a node that was alive when it was sent went silent, fails `node_lost` naming the
 * node, but silence alone is not the verdict: a node busy in synchronous work cannot answer either.
 * The watch then asks the silent node process's own `<prefix>.tools.alive.<instance>`; only NATS's
 * "no responders" (no connection holds that subscription any more) fails the calls, while a timeout
 * or an answer means the process is there, busy, and the calls wait (it is asked again at later
 * ticks). Nothing is done per call: the calls in flight are read from the requester at each tick, so a
 * call that ends before the next tick costs nothing; the questions cost a message per module per
 * `probeMs`, and one answer per node.
 */
import { createInbox, type NatsConnection, NoRespondersError } from "@nats-io/transport-node";
import { ToolError } from "@tackle/core";
import { ALIVE_VERB, decodeJson, encodeJson, HELD_VERB, type HeldAnswer } from "../nats/wire.ts";

export interface NodeWatchOptions {
  /** How often a module with calls in flight is asked. Default 500 ms. */
  readonly probeMs?: number;
  /**
   * How long a holder may go without claiming its call before the watch asks whether its process is
   * still connected (the call fails only if it is not). Default 2500 ms.
   */
  readonly lostAfterMs?: number;
}

export const DEFAULT_PROBE_MS = 500;
export const DEFAULT_LOST_AFTER_MS = 2500;
/** A module's watch keeps asking this long after its last call, so the nodes serving it stay known. */
const idleMs = 10_000;
/** A node instance unheard this long is forgotten. */
const forgetMs = 60_000;
/** Call ids per question. */
const idsPerProbe = 1000;

/** A call in flight, as the requester holds it. */
export interface CallInFlight {
  readonly token: string;
  /** The module's prefix; undefined for a request the watch does not follow. */
  readonly prefix: string | undefined;
  readonly callId: string;
  readonly name: string;
}

/** Where the watch reads the calls in flight and settles a lost one. */
export interface WatchedCalls {
  inFlight(): Iterable<CallInFlight>;
  isWaiting(token: string): boolean;
  /** Settles the call with that token (its node is gone). */
  lost(token: string, error: ToolError): void;
}

interface Instance {
  readonly node: string;
  /** `<prefix>.tools.alive.<instance>`, which the node process subscribes while it serves there. */
  readonly aliveSubject: string;
  lastSeen: number;
  /** A question to `aliveSubject` is out. */
  checking: boolean;
  /** It went silent and NATS answered "no responders" on `aliveSubject`: its connection is gone. */
  gone: boolean;
}

const isNoResponders = (error: unknown): boolean =>
  error instanceof NoRespondersError || (error as Error)?.cause instanceof NoRespondersError;

interface Watched {
  readonly token: string;
  readonly name: string;
  /** When a question first listed it: it was sent at most one `probeMs` earlier. */
  readonly listedAt: number;
  holder: Instance | undefined;
  /** When its holder last claimed it. */
  seenAt: number;
}

interface ModuleWatch {
  /** Its calls that a question has listed, by call id. */
  readonly calls: Map<string, Watched>;
  readonly instances: Map<string, Instance>;
  lastUsed: number;
  /** A call started since the last tick. */
  used: boolean;
}

export interface NodeWatch {
  /** A call was just sent to the module on `prefix` (after its request was published). */
  started(prefix: string): void;
  /** The connection dropped: nothing is judged until it is back. */
  pause(): void;
  /** Back: every node gets a fresh `lostAfterMs` to answer. */
  resume(): void;
  close(): void;
}

export function createNodeWatch(
  connection: NatsConnection,
  calls: WatchedCalls,
  options: NodeWatchOptions = {},
): NodeWatch {
  const probeMs = options.probeMs ?? DEFAULT_PROBE_MS;
  const lostAfterMs = options.lostAfterMs ?? DEFAULT_LOST_AFTER_MS;
  /** How long a silent node's alive subject is given: "no responders" comes at once, so this is short. */
  const checkMs = Math.min(1000, Math.max(probeMs, 250));
  const modules = new Map<string, ModuleWatch>();
  let timer: NodeJS.Timeout | undefined;
  /** When the armed tick is due: a tick far later than that means this process itself stalled. */
  let due = 0;
  let paused = false;
  let closed = false;
  let inbox: string | undefined;
  let subscription: { unsubscribe(): void } | undefined;

  function replySubject(): string {
    if (inbox !== undefined) return inbox;
    const subject = createInbox((connection as { options?: { inboxPrefix?: string } }).options?.inboxPrefix);
    inbox = subject;
    subscription = connection.subscribe(subject, {
      callback: (error, message) => {
        if (error !== null) {
          if (inbox === subject) inbox = undefined;
          return;
        }
        try {
          heard(decodeJson(message.data) as HeldAnswer);
        } catch {
          // Not an answer of ours.
        }
      },
    });
    return subject;
  }

  function heard(answer: HeldAnswer): void {
    if (typeof answer?.prefix !== "string" || typeof answer.instance !== "string") return;
    const watch = modules.get(answer.prefix);
    if (watch === undefined) return;
    const now = performance.now();
    const key = `${answer.node}/${answer.instance}`;
    let instance = watch.instances.get(key);
    if (instance === undefined) {
      instance = {
        node: String(answer.node),
        aliveSubject: `${answer.prefix}.${ALIVE_VERB}.${answer.instance}`,
        lastSeen: now,
        checking: false,
        gone: false,
      };
      watch.instances.set(key, instance);
    }
    instance.lastSeen = now;
    // It answers: whatever the bus said of it while it was cut off, it is back.
    instance.gone = false;
    if (!Array.isArray(answer.held)) return;
    for (const callId of answer.held) {
      const call = watch.calls.get(callId);
      if (call === undefined) continue;
      call.holder = instance;
      call.seenAt = now;
    }
  }

  /** Asks the module's nodes which of `ids` they hold. */
  function ask(prefix: string, ids: readonly string[]): void {
    const reply = replySubject();
    for (let start = 0; start === 0 || start < ids.length; start += idsPerProbe) {
      connection.publish(
        `${prefix}.${HELD_VERB}`,
        encodeJson({ callIds: ids.slice(start, start + idsPerProbe) }),
        {
          reply,
        },
      );
    }
  }

  /**
   * Asks whether a silent node process is still connected. "No responders" marks it gone and judges
   * its module at once; an answer or a timeout leaves it alive (busy), to be asked again later.
   */
  function check(prefix: string, instance: Instance): void {
    if (instance.checking || instance.gone || paused || closed) return;
    instance.checking = true;
    connection.request(instance.aliveSubject, undefined, { timeout: checkMs }).then(
      () => {
        instance.checking = false;
      },
      (error: unknown) => {
        instance.checking = false;
        if (!isNoResponders(error) || paused || closed) return;
        instance.gone = true;
        const watch = modules.get(prefix);
        if (watch !== undefined) judge(watch, prefix, performance.now());
      },
    );
  }

  function moduleWatch(prefix: string, now: number): ModuleWatch {
    let watch = modules.get(prefix);
    if (watch === undefined) {
      watch = { calls: new Map(), instances: new Map(), lastUsed: now, used: false };
      modules.set(prefix, watch);
    }
    return watch;
  }

  /** Reads the calls in flight (on `only`, if given) into their modules' watches; forgets the settled. */
  function collect(now: number, only?: string): Map<string, string[]> {
    const ids = new Map<string, string[]>();
    for (const call of calls.inFlight()) {
      if (call.prefix === undefined || (only !== undefined && call.prefix !== only)) continue;
      const watch = moduleWatch(call.prefix, now);
      watch.lastUsed = now;
      if (!watch.calls.has(call.callId)) {
        watch.calls.set(call.callId, {
          token: call.token,
          name: call.name,
          listedAt: now,
          holder: undefined,
          seenAt: 0,
        });
      }
      let list = ids.get(call.prefix);
      if (list === undefined) {
        list = [];
        ids.set(call.prefix, list);
      }
      list.push(call.callId);
    }
    for (const watch of modules.values()) {
      for (const [callId, call] of watch.calls) if (!calls.isWaiting(call.token)) watch.calls.delete(callId);
    }
    return ids;
  }

  function judge(watch: ModuleWatch, prefix: string, now: number): void {
    for (const [callId, call] of watch.calls) {
      if (call.holder !== undefined) {
        if (now - call.seenAt <= lostAfterMs) continue;
        const holder = call.holder;
        // A holder that still answers, without the call, has let it go (restarted in place, or it
        // replied); one that is silent may only be busy: it is failed once the bus says it is gone.
        if (now - holder.lastSeen > lostAfterMs && !holder.gone) {
          check(prefix, holder);
          continue;
        }
        watch.calls.delete(callId);
        calls.lost(
          call.token,
          new ToolError(
            "node_lost",
            `Node ${holder.node}, which was running "${call.name}", is gone (it has not claimed the call for ${lostAfterMs} ms${holder.gone ? " and its connection to the bus has closed" : ""}); the tool may have run, so check before calling again`,
            { retryable: false, data: { tool: call.name, node: holder.node, started: true } },
          ),
        );
        continue;
      }
      if (now - call.listedAt <= lostAfterMs) continue;
      // No node that answers holds it: it went to a node that was alive when it was sent and is silent
      // now. Only once the bus says every such node's connection is gone: a busy one may hold it unread.
      const gone = new Set<string>();
      let busy = false;
      for (const instance of watch.instances.values()) {
        if (now - instance.lastSeen <= lostAfterMs || instance.lastSeen < call.listedAt - 3 * probeMs)
          continue;
        if (instance.gone) gone.add(instance.node);
        else {
          busy = true;
          check(prefix, instance);
        }
      }
      if (busy || gone.size === 0) continue;
      const nodes = [...gone].sort();
      watch.calls.delete(callId);
      calls.lost(
        call.token,
        new ToolError(
          "node_lost",
          `"${call.name}" was sent as node ${nodes.join(" or node ")} went away, and no node that answers holds it; the tool may have run, so check before calling again`,
          {
            retryable: false,
            data: {
              tool: call.name,
              node: nodes[0],
              ...(nodes.length > 1 ? { nodes } : {}),
              started: "unknown",
            },
          },
        ),
      );
    }
  }

  /** Every node and every call gets a fresh `lostAfterMs` from now. */
  function refresh(now: number): void {
    for (const watch of modules.values()) {
      for (const instance of watch.instances.values()) instance.lastSeen = now;
      // Unclaimed calls are listed again, afresh, by the next question.
      for (const [callId, call] of watch.calls) {
        if (call.holder === undefined) watch.calls.delete(callId);
        else call.seenAt = now;
      }
    }
  }

  function tick(): void {
    timer = undefined;
    if (closed) return;
    const now = performance.now();
    // This process was too busy to ask and to read the answers: their silence proves nothing.
    if (now - due > probeMs) refresh(now);
    if (!paused) for (const [prefix, watch] of modules) judge(watch, prefix, now);
    const ids = paused ? new Map<string, string[]>() : collect(now);
    for (const [prefix, watch] of modules) {
      if (watch.used) {
        watch.used = false;
        watch.lastUsed = now;
      }
      for (const [key, instance] of watch.instances) {
        if (now - instance.lastSeen > forgetMs) watch.instances.delete(key);
      }
      if (!ids.has(prefix) && now - watch.lastUsed > idleMs) {
        modules.delete(prefix);
        continue;
      }
      if (paused) continue;
      try {
        ask(prefix, ids.get(prefix) ?? []);
      } catch {
        // Closed or refused: no node answers, and no call is judged on a silence this caused.
        for (const [callId, call] of watch.calls) if (call.holder === undefined) watch.calls.delete(callId);
      }
    }
    arm();
  }

  function arm(): void {
    if (timer !== undefined || closed || modules.size === 0) return;
    due = performance.now() + probeMs;
    timer = setTimeout(tick, probeMs);
    // The connection keeps the process alive while a call waits; the watch alone must not.
    timer.unref();
  }

  return {
    started(prefix) {
      if (closed) return;
      let watch = modules.get(prefix);
      if (watch === undefined) {
        // A module's first call is asked about at once, so its nodes and the call's holder are known
        // from the start.
        const now = performance.now();
        watch = moduleWatch(prefix, now);
        if (!paused) {
          const ids = collect(now, prefix).get(prefix) ?? [];
          try {
            ask(prefix, ids);
          } catch {
            watch.calls.clear();
          }
        }
      }
      watch.used = true;
      if (timer === undefined) arm();
    },
    pause() {
      paused = true;
    },
    resume() {
      paused = false;
      refresh(performance.now());
    },
    close() {
      closed = true;
      clearTimeout(timer);
      timer = undefined;
      modules.clear();
      subscription?.unsubscribe();
      subscription = undefined;
    },
  };
}
