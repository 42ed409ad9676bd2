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
import {
  ALIVE_VERB,
  decodeJson,
  encodeJson,
  HELD_VERB,
  type HeldAnswer,
  type HeldQuestion,
} from "../nats/wire.ts";
import type {
  Instance,
  ModuleWatch,
  NodeWatch,
  NodeWatchOptions,
  Watched,
  WatchedCalls,
} from "./node-watch-types.ts";

export type { CallInFlight, NodeWatch, NodeWatchOptions, WatchedCalls } from "./node-watch-types.ts";

export const DEFAULT_PROBE_MS = 500;
export const DEFAULT_LOST_AFTER_MS = 2500;
/** A module's watch keeps asking this long after its last call, so the nodes serving it stay known. */
const idleMs = 10_000;
/** A node instance unheard this long is forgotten. */
const forgetMs = 60_000;
/** Call ids per question. */
const idsPerProbe = 1000;
const isNoResponders = (error: unknown): boolean =>
  error instanceof NoRespondersError || (error as Error)?.cause instanceof NoRespondersError;

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
  let pausedAt = 0;
  let closed = false;
  let inbox: string | undefined;
  let subscription: { unsubscribe(): void } | undefined;

  let asked = 0;
  /**
   * A reply subject of its own per question, under one subscription: a node holding a Tackle-issued
   * credential may answer a reply subject once per request it got (`allow_responses`), and two
   * questions in flight on one subject leave the second answer refused by the broker.
   */
  function replySubject(): string {
    asked += 1;
    if (inbox !== undefined) return `${inbox}.${asked}`;
    const subject = createInbox((connection as { options?: { inboxPrefix?: string } }).options?.inboxPrefix);
    inbox = subject;
    subscription = connection.subscribe(`${subject}.*`, {
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
    return `${subject}.${asked}`;
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
        reconnects: undefined,
        reconnectedAt: Number.NEGATIVE_INFINITY,
      };
      watch.instances.set(key, instance);
    }
    instance.lastSeen = now;
    if (typeof answer.reconnects === "number") {
      if (instance.reconnects !== undefined && answer.reconnects > instance.reconnects)
        instance.reconnectedAt = now;
      instance.reconnects = answer.reconnects;
    }
    // It answers: whatever the bus said of it while it was cut off, it is back.
    instance.gone = false;
    if (!Array.isArray(answer.held)) return;
    for (const callId of answer.held) {
      const call = watch.calls.get(callId);
      if (call === undefined) continue;
      call.holder = instance;
      call.seenAt = now;
      // Running: its reply will come.
      call.check = false;
    }
    if (Array.isArray(answer.finished) || Array.isArray(answer.disowned))
      checked(watch, instance, answer, now);
  }

  /** What a node said of the calls a question checked. */
  function checked(watch: ModuleWatch, instance: Instance, answer: HeldAnswer, now: number): void {
    const byReply = new Map<string, Watched>();
    for (const call of watch.calls.values()) if (call.check) byReply.set(call.reply, call);
    for (const entry of answer.finished ?? []) {
      const call = byReply.get(entry?.reply);
      if (call === undefined || call.finished !== undefined) continue;
      call.finished = { node: instance.node, outcome: String(entry.outcome), at: now };
    }
    const remembered = typeof answer.rememberedMs === "number" ? answer.rememberedMs : -1;
    for (const reply of answer.disowned ?? []) {
      const call = byReply.get(reply);
      // Its memory of finished calls must reach back to the send, or "never saw it" may be "forgot it".
      if (call !== undefined) call.disownedBy.set(instance, remembered >= now - call.sentAt);
    }
  }

  /** Asks the module's nodes which of `ids` they hold, and what became of the calls to check. */
  function ask(prefix: string, ids: readonly string[], watch: ModuleWatch | undefined): void {
    const reply = replySubject();
    const check: NonNullable<HeldQuestion["check"]>[number][] = [];
    if (watch !== undefined) {
      for (const [callId, call] of watch.calls)
        if (call.check) check.push({ callId, reply: call.reply, disown: true });
    }
    for (let start = 0; start === 0 || start < ids.length; start += idsPerProbe) {
      const question: HeldQuestion = {
        callIds: ids.slice(start, start + idsPerProbe),
        ...(start === 0 && check.length > 0 ? { check } : {}),
      };
      connection.publish(`${prefix}.${HELD_VERB}`, encodeJson(question), { reply });
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
          reply: call.reply,
          sentAt: call.sentAt,
          suspended: call.suspended,
          listedAt: now,
          holder: undefined,
          seenAt: 0,
          check: call.suspended,
          finished: undefined,
          disownedBy: new Map(),
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
      if (call.finished !== undefined) {
        // Its reply goes out before the node's answer, on the node's one connection: a call still
        // waiting when the answer came lost its reply. Half a tick more lets a reordered reply land.
        if (now - call.finished.at < probeMs / 2) continue;
        watch.calls.delete(callId);
        const { node, outcome } = call.finished;
        calls.lost(
          call.token,
          new ToolError(
            "reply_lost",
            `Node ${node} ran "${call.name}" to its end (${outcome === "ok" ? "it succeeded" : `it failed ${outcome}`}), but the reply was lost on the way back (a broker outage); it ran, so check before calling again`,
            { retryable: false, data: { tool: call.name, node, outcome } },
          ),
        );
        continue;
      }
      if (call.holder !== undefined) {
        if (now - call.seenAt <= lostAfterMs) continue;
        const holder = call.holder;
        // A holder that still answers, without the call, has let it go (restarted in place, or it
        // replied); one that is silent may only be busy: it is failed once the bus says it is gone.
        if (now - holder.lastSeen > lostAfterMs && !holder.gone) {
          check(prefix, holder);
          continue;
        }
        // One that answers is asked once whether it finished the call (the reply was lost).
        if (!holder.gone && !call.disownedBy.has(holder)) {
          call.check = true;
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
      const live: Instance[] = [];
      let busy = false;
      for (const instance of watch.instances.values()) {
        if (instance.lastSeen < call.listedAt - 3 * probeMs) continue;
        if (now - instance.lastSeen <= lostAfterMs) live.push(instance);
        else if (instance.gone) gone.add(instance.node);
        else {
          busy = true;
          check(prefix, instance);
        }
      }
      if (busy) continue;
      if (gone.size === 0) {
        // Caught in flight by a dropped connection (this client's, or a node's that reconnected since
        // it was sent), and no node that answers holds it: asked with `disown`, each says whether it
        // finished it or never saw it (and will now refuse it).
        const reconnected = live.filter((instance) => instance.reconnectedAt >= call.sentAt);
        if (live.length > 0 && (call.suspended || reconnected.length > 0))
          notDelivered(watch, callId, call, live, reconnected);
        continue;
      }
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

  /**
   * A call caught by the outage that every node that could have received it disowned: it never ran,
   * and never will. A node whose memory does not reach back to its send cannot tell: it waits.
   */
  function notDelivered(
    watch: ModuleWatch,
    callId: string,
    call: Watched,
    live: readonly Instance[],
    reconnected: readonly Instance[],
  ): void {
    if (!live.every((instance) => call.disownedBy.has(instance))) {
      call.check = true;
      return;
    }
    if (!live.every((instance) => call.disownedBy.get(instance) === true)) return;
    const nodes = [...new Set(live.map((instance) => instance.node))].sort();
    watch.calls.delete(callId);
    calls.lost(
      call.token,
      new ToolError(
        "not_delivered",
        `"${call.name}" never reached a node: ${call.suspended ? "this client's" : `node ${[...new Set(reconnected.map((instance) => instance.node))].sort().join(" and node ")}'s`} connection to NATS dropped while it was in flight, and every node serving it (${nodes.join(", ")}) says it did not receive it and will not run it; it did not run, so it is safe to call again`,
        { retryable: true, data: { tool: call.name, nodes } },
      ),
    );
  }

  /**
   * Every node that was answering at `asOf` and every call gets a fresh `lostAfterMs` from now (a node
   * silent before that stays so: it is no candidate for calls listed afresh).
   */
  function refresh(now: number, asOf: number): void {
    for (const watch of modules.values()) {
      for (const instance of watch.instances.values())
        if (asOf - instance.lastSeen <= lostAfterMs) instance.lastSeen = now;
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
    if (now - due > probeMs) refresh(now, due - probeMs);
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
        ask(prefix, ids.get(prefix) ?? [], watch);
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
            ask(prefix, ids, watch);
          } catch {
            watch.calls.clear();
          }
        }
      }
      watch.used = true;
      if (timer === undefined) arm();
    },
    pause() {
      if (!paused) pausedAt = performance.now();
      paused = true;
    },
    resume() {
      paused = false;
      refresh(performance.now(), pausedAt);
      // Every call still waiting was in flight when the connection dropped: ask what became of it.
      for (const watch of modules.values()) for (const call of watch.calls.values()) call.check = true;
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
