/**
 * The node watch's record (ADR 0207): each module's calls in flight and the node instances that answer
 * for it, updated from the requester's calls and from the nodes' answers. No messages are sent here.
 */
import { ALIVE_VERB, type HeldAnswer } from "../nats/wire.ts";
import type { Instance, ModuleWatch, Watched, WatchedCalls } from "./node-watch-types.ts";

export type Modules = Map<string, ModuleWatch>;

/** A module's watch keeps asking this long after its last call, so the nodes serving it stay known. */
const idleMs = 10_000;
/** A node instance unheard this long is forgotten. */
const forgetMs = 60_000;

export function moduleWatch(modules: Modules, prefix: string, now: number): ModuleWatch {
  let watch = modules.get(prefix);
  if (watch === undefined) {
    watch = {
      calls: new Map(),
      instances: new Map(),
      lastUsed: now,
      used: false,
      emptyAt: undefined,
      checkingEmpty: false,
    };
    modules.set(prefix, watch);
  }
  return watch;
}

/** Reads the calls in flight (on `only`, if given) into their modules' watches; forgets the settled. */
export function collectCalls(
  modules: Modules,
  calls: WatchedCalls,
  now: number,
  only?: string,
): Map<string, string[]> {
  const ids = new Map<string, string[]>();
  for (const call of calls.inFlight()) {
    if (call.prefix === undefined || (only !== undefined && call.prefix !== only)) continue;
    const watch = moduleWatch(modules, call.prefix, now);
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

/** A node's answer: it is alive, holds these calls, and (when asked) finished or disowned those. */
export function recordAnswer(modules: Modules, answer: HeldAnswer, now: number): void {
  if (typeof answer?.prefix !== "string" || typeof answer.instance !== "string") return;
  const watch = modules.get(answer.prefix);
  if (watch === undefined) return;
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
    recordChecked(watch, instance, answer, now);
}

/** What a node said of the calls a question checked. */
function recordChecked(watch: ModuleWatch, instance: Instance, answer: HeldAnswer, now: number): void {
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

/**
 * Every node that was answering at `asOf` and every call gets a fresh `lostAfterMs` from now (a node
 * silent before that stays so: it is no candidate for calls listed afresh).
 */
export function refreshAll(modules: Modules, now: number, asOf: number, lostAfterMs: number): void {
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

/**
 * A tick's upkeep of one module's watch: notes its use, forgets node instances unheard for long, and
 * drops the watch once idle with no call in flight (`hasCalls`). Whether it is still watched.
 */
export function keepWatching(modules: Modules, prefix: string, hasCalls: boolean, now: number): boolean {
  const watch = modules.get(prefix);
  if (watch === undefined) return false;
  if (watch.used) {
    watch.used = false;
    watch.lastUsed = now;
  }
  for (const [key, instance] of watch.instances) {
    if (now - instance.lastSeen > forgetMs) watch.instances.delete(key);
  }
  if (!hasCalls && now - watch.lastUsed > idleMs) {
    modules.delete(prefix);
    return false;
  }
  return true;
}
