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
import {
  decodeJson,
  encodeJson,
  HELD_VERB,
  type HeldAnswer,
  type HeldQuestion,
  SERVING_VERB,
  type ServingNotice,
} from "../nats/wire.ts";
import {
  collectCalls,
  keepWatching,
  type Modules,
  moduleWatch,
  recordAnswer,
  refreshAll,
} from "./node-watch-state.ts";
import type { Instance, ModuleWatch, NodeWatch, NodeWatchOptions, WatchedCalls } from "./node-watch-types.ts";
import { judgeModule, type Verdicts } from "./node-watch-verdicts.ts";

export type { CallInFlight, NodeWatch, NodeWatchOptions, WatchedCalls } from "./node-watch-types.ts";

export const DEFAULT_PROBE_MS = 500;
export const DEFAULT_LOST_AFTER_MS = 2500;
/** Call ids per question. */
const idsPerProbe = 1000;
const isNoResponders = (error: unknown): boolean =>
  error instanceof NoRespondersError || (error as Error)?.cause instanceof NoRespondersError;

/**
 * Asks a module's nodes which calls they hold. A reply subject of its own per question, under one
 * subscription: a node holding a Tackle-issued credential may answer a reply subject once per request
 * it got (`allow_responses`), and two questions in flight on one subject leave the second answer
 * refused by the broker.
 */
function createQuestions(connection: NatsConnection, onAnswer: (answer: HeldAnswer) => void) {
  let inbox: string | undefined;
  let subscription: { unsubscribe(): void } | undefined;
  let asked = 0;

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
        let answer: HeldAnswer;
        try {
          answer = decodeJson(message.data) as HeldAnswer;
        } catch {
          return; // Not an answer of ours.
        }
        onAnswer(answer);
      },
    });
    return `${subject}.${asked}`;
  }

  return {
    /** Asks the module's nodes which of `ids` they hold, and what became of the calls to check. */
    ask(prefix: string, ids: readonly string[], watch: ModuleWatch | undefined): void {
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
    },
    close(): void {
      subscription?.unsubscribe();
      subscription = undefined;
    },
  };
}

/**
 * Hears the module's nodes announce themselves as they start serving (ADR 0225), so an instance that
 * takes a call and dies before it answered any question is still known, and asked about once silent.
 * A credential that may not read the announcements (issued before them) is refused: then only the
 * answers make nodes known, as before.
 */
function listenForNodes(
  connection: NatsConnection,
  prefix: string,
  onNotice: (notice: HeldAnswer) => void,
): { unsubscribe(): void } | undefined {
  try {
    return connection.subscribe(`${prefix}.${SERVING_VERB}`, {
      callback: (error, message) => {
        if (error !== null) return;
        let notice: ServingNotice;
        try {
          notice = decodeJson(message.data) as ServingNotice;
        } catch {
          return; // Not an announcement of ours.
        }
        // Known from now on, holding nothing yet: the questions tell what it holds.
        if (notice?.prefix === prefix) onNotice({ ...notice, held: [] });
      },
    });
  } catch {
    return undefined; // Closed: nothing to hear.
  }
}

/**
 * Asks whether a silent node process is still connected. "No responders" marks it gone and calls
 * `onGone`; an answer or a timeout leaves it alive (busy), to be asked again later.
 */
function checkAlive(
  connection: NatsConnection,
  instance: Instance,
  checkMs: number,
  /** Whether the watch is paused or closed: no check starts then, and none marks a node gone. */
  stopped: () => boolean,
  onGone: () => void,
): void {
  if (instance.checking || instance.gone || stopped()) return;
  instance.checking = true;
  connection.request(instance.aliveSubject, undefined, { timeout: checkMs }).then(
    () => {
      instance.checking = false;
    },
    (error: unknown) => {
      instance.checking = false;
      if (!isNoResponders(error) || stopped()) return;
      instance.gone = true;
      onGone();
    },
  );
}

/**
 * Asks a module's `tools.held` as a request: "no responders" means no connection serves the module
 * there or holds a call on it (`watch.emptyAt`, then `onEmpty`); an answer makes its node known.
 */
function checkServed(
  connection: NatsConnection,
  prefix: string,
  watch: ModuleWatch,
  checkMs: number,
  stopped: () => boolean,
  on: { onAnswer(answer: HeldAnswer): void; onEmpty(): void },
): void {
  if (watch.checkingEmpty || stopped()) return;
  watch.checkingEmpty = true;
  const question: HeldQuestion = { callIds: [] };
  connection.request(`${prefix}.${HELD_VERB}`, encodeJson(question), { timeout: checkMs }).then(
    (message) => {
      watch.checkingEmpty = false;
      try {
        on.onAnswer(decodeJson(message.data) as HeldAnswer);
      } catch {
        // Not an answer of ours.
      }
    },
    (error: unknown) => {
      watch.checkingEmpty = false;
      if (!isNoResponders(error) || stopped()) return;
      watch.emptyAt = performance.now();
      on.onEmpty();
    },
  );
}

/** Each watched module's subscription to its nodes' announcements, each taken as an answer holding nothing. */
function createAnnouncements(connection: NatsConnection, modules: Modules) {
  const subscriptions = new Map<string, { unsubscribe(): void } | undefined>();
  return {
    listen(prefix: string): void {
      if (subscriptions.has(prefix)) return;
      const record = (notice: HeldAnswer) => recordAnswer(modules, notice, performance.now());
      subscriptions.set(prefix, listenForNodes(connection, prefix, record));
    },
    /** Stops listening for the modules no longer watched. */
    prune(): void {
      for (const [prefix, subscription] of subscriptions) {
        if (modules.has(prefix)) continue;
        subscription?.unsubscribe();
        subscriptions.delete(prefix);
      }
    },
    close(): void {
      for (const subscription of subscriptions.values()) subscription?.unsubscribe();
      subscriptions.clear();
    },
  };
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
  const modules: Modules = new Map();
  const announcements = createAnnouncements(connection, modules);
  let timer: NodeJS.Timeout | undefined;
  /** When the armed tick is due: a tick far later than that means this process itself stalled. */
  let due = 0;
  let paused = false;
  let pausedAt = 0;
  let closed = false;
  // The answer may be a JSON value of any shape: recordAnswer checks it.
  const questions = createQuestions(connection, (answer) => recordAnswer(modules, answer, performance.now()));

  /** Judging one module's calls, with the alive check of a silent node bound to that module. */
  const verdicts = (prefix: string): Verdicts => ({
    probeMs,
    lostAfterMs,
    calls,
    check: (instance) => check(prefix, instance),
    checkEmpty: () => checkEmpty(prefix),
  });

  const stopped = () => paused || closed;
  /** Asks whether a silent node process is still connected; gone, its module is judged at once. */
  function check(prefix: string, instance: Instance): void {
    checkAlive(connection, instance, checkMs, stopped, () => {
      const watch = modules.get(prefix);
      if (watch !== undefined) judgeModule(watch, performance.now(), verdicts(prefix));
    });
  }

  /** Asks whether anything serves the module; "no responders" judges its calls at once. */
  function checkEmpty(prefix: string): void {
    const watch = modules.get(prefix);
    if (watch === undefined) return;
    checkServed(connection, prefix, watch, checkMs, stopped, {
      onAnswer: (answer) => recordAnswer(modules, answer, performance.now()),
      onEmpty: () => judgeModule(watch, performance.now(), verdicts(prefix)),
    });
  }

  function tick(): void {
    timer = undefined;
    if (closed) return;
    const now = performance.now();
    // This process was too busy to ask and to read the answers: their silence proves nothing.
    if (now - due > probeMs) refreshAll(modules, now, due - probeMs, lostAfterMs);
    if (!paused) for (const [prefix, watch] of modules) judgeModule(watch, now, verdicts(prefix));
    const ids = paused ? new Map<string, string[]>() : collectCalls(modules, calls, now);
    for (const [prefix, watch] of modules) {
      if (!keepWatching(modules, prefix, ids.has(prefix), now) || paused) continue;
      try {
        questions.ask(prefix, ids.get(prefix) ?? [], watch);
      } catch {
        // Closed or refused: no node answers, and no call is judged on a silence this caused.
        for (const [callId, call] of watch.calls) if (call.holder === undefined) watch.calls.delete(callId);
      }
    }
    announcements.prune();
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
        watch = moduleWatch(modules, prefix, now);
        if (!paused) {
          const ids = collectCalls(modules, calls, now, prefix).get(prefix) ?? [];
          try {
            questions.ask(prefix, ids, watch);
          } catch {
            watch.calls.clear();
          }
        }
      }
      announcements.listen(prefix);
      watch.used = true;
      if (timer === undefined) arm();
    },
    pause() {
      if (!paused) pausedAt = performance.now();
      paused = true;
    },
    resume() {
      paused = false;
      refreshAll(modules, performance.now(), pausedAt, lostAfterMs);
      // Every call still waiting was in flight when the connection dropped: ask what became of it.
      for (const watch of modules.values()) for (const call of watch.calls.values()) call.check = true;
    },
    close() {
      closed = true;
      clearTimeout(timer);
      timer = undefined;
      modules.clear();
      announcements.close();
      questions.close();
    },
  };
}
