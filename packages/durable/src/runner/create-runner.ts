/** `createRunner`: drives graphs over a store — start, resume, get, frames — one node at a time. */
import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import { silentLogger, ToolAbortedError, toToolError } from "@tackle/core";
import { codecVersion, decodeValue, encodeValue } from "../codec/codec.ts";
import { DurableError } from "../errors/durable-error.ts";
import type { Graph } from "../graph/create-graph.ts";
import type { InterruptRequest } from "../interrupt/interrupt.ts";
import type {
  CommitBatch,
  Frame,
  JournalRecord,
  RunPatch,
  RunRecord,
  RunStatus,
} from "../store/durable-store.ts";
import { createSqliteStore } from "../stores/sqlite/sqlite-store.ts";
import { checkAnswer, expiredAnswer, expiryOf, withEditFingerprint } from "./answers.ts";
import { toFrameData } from "./frame-data.ts";
import { type Checkpoint, checkpointsOf, type HistoryOptions, historyFrameTypes } from "./history.ts";
import { NodeRuntime } from "./node-context.ts";
import { runNode } from "./run-node.ts";
import type { RunSnapshot } from "./run-snapshot.ts";
import type {
  Answers,
  ClientRun,
  ForkOptions,
  FramesOptions,
  Launched,
  ResumeOptions,
  Runner,
  RunnerOptions,
  RunSummary,
  StartOptions,
} from "./runner-api.ts";
import { snapshotOf } from "./snapshot-of.ts";
import { stateDeltaOf } from "./state-delta.ts";
import { checkStepOptions } from "./step-policy.ts";
import { checkVersion } from "./versions.ts";
import { watchFrames } from "./watch-frames.ts";

export type {
  Answers,
  ClientRun,
  ForkOptions,
  FramesOptions,
  Launched,
  PruneOptions,
  RecoverOptions,
  ResumeOptions,
  Runner,
  RunnerOptions,
  RunSummary,
  StartOptions,
  ThreadSummary,
} from "./runner-api.ts";

/** Where runs live when no store is given: one SQLite file under the working directory. */
export const defaultStorePath = ".tackle/durable.sqlite";

interface Cursor {
  visits: Record<string, number>;
  tools: Record<string, number>;
  /** The graph version the run started on (absent: 1). */
  version?: number;
}

export function createRunner(options: RunnerOptions = {}): Runner {
  if (typeof (options.store as { then?: unknown } | undefined)?.then === "function") {
    // createPostgresStore is async: the un-awaited promise would fail later as "store.createRun is not a function".
    throw new DurableError(
      "invalid_store",
      "The store is a promise: await the store factory (`store: await createPostgresStore(...)`) before passing it to createRunner",
    );
  }
  const store =
    typeof options.store === "object"
      ? options.store
      : createSqliteStore({ path: options.store ?? defaultStorePath });
  const logger = options.logger ?? silentLogger;
  // biome-ignore lint/suspicious/noExplicitAny: graphs of any state shape
  const graphs = new Map<string, Graph<any>>();
  for (const graph of options.graphs ?? []) graphs.set(graph.name, graph);
  const active = new Map<string, Promise<unknown>>();
  const landed = new EventEmitter();
  landed.setMaxListeners(0);
  const pollIntervalMs = options.pollIntervalMs ?? 250;
  const leaseMs = options.leaseMs ?? 30_000;
  const maxTakeovers = Math.max(0, Math.floor(options.maxTakeovers ?? 3));
  checkStepOptions(options.retry === undefined ? undefined : { retry: options.retry }, "createRunner");
  let closed = false;
  /** The node executing now, per thread driven here: a cancel aborts its signal. */
  const current = new Map<string, NodeRuntime>();

  // biome-ignore lint/suspicious/noExplicitAny: graphs of any state shape
  function register(graph: Graph<any>): void {
    const known = graphs.get(graph.name);
    if (known !== undefined && known !== graph) {
      throw new DurableError("invalid_graph", `Another graph named "${graph.name}" is already registered`);
    }
    graph.entry();
    graphs.set(graph.name, graph);
  }

  /** One writer per run: commits in order, seqs in order, fenced by the owner token. */
  function writer(threadId: string, owner: string, lastSeq: number) {
    let seq = lastSeq;
    let chain: Promise<void> = Promise.resolve();
    let lastWriteAt = Date.now();
    return {
      nextSeq: () => ++seq,
      get lastWriteAt() {
        return lastWriteAt;
      },
      write(batch: CommitBatch): Promise<void> {
        const written = chain.then(() => store.commit(threadId, owner, batch));
        chain = written.catch(() => {});
        return written.then(() => {
          lastWriteAt = Date.now();
          if ((batch.frames?.length ?? 0) > 0) landed.emit(threadId);
        });
      },
    };
  }

  /** Drives a run, writing a heartbeat when a long step leaves the lease without a write. */
  async function drive<State extends object>(
    run: RunRecord,
    lastSeq: number,
    firstFrames: Frame[] = [],
  ): Promise<RunSnapshot<State>> {
    const out = writer(run.threadId, run.owner, lastSeq);
    const beat = leaseMs / 3;
    const heartbeat =
      leaseMs > 0
        ? setInterval(() => {
            // Fenced (cancelled, or taken over): the steps in flight here see their signals abort now.
            if (Date.now() - out.lastWriteAt >= beat)
              out.write({}).catch((error: unknown) => {
                if (DurableError.isInstance(error) && error.code === "run_fenced")
                  current.get(run.threadId)?.abort(error);
              });
          }, beat)
        : undefined;
    heartbeat?.unref();
    try {
      return await driveWith<State>(out, run, firstFrames);
    } finally {
      clearInterval(heartbeat);
    }
  }

  async function driveWith<State extends object>(
    out: ReturnType<typeof writer>,
    run: RunRecord,
    firstFrames: Frame[],
  ): Promise<RunSnapshot<State>> {
    const { threadId } = run;
    const graph = graphs.get(run.graph);
    let pending = firstFrames.map((frame) => ({ ...frame, seq: out.nextSeq() }));
    // A node's transition waits for the next commit (the next node's first step, or a flush on the next
    // turn of the event loop): one commit per node in the common case (ADR 0107).
    let carry: { frames: Frame[]; journal: JournalRecord[]; run: RunPatch } | undefined;
    let carryError: unknown;
    const flushWrite = (batch: CommitBatch): Promise<void> => {
      if (carryError !== undefined) return Promise.reject(carryError);
      const merged: CommitBatch = {
        frames: [...(carry?.frames ?? []), ...pending, ...(batch.frames ?? [])],
        journal: [...(carry?.journal ?? []), ...(batch.journal ?? [])],
        run: { ...carry?.run, ...batch.run },
      };
      carry = undefined;
      pending = [];
      return out.write(merged);
    };
    const failRun = async (error: unknown, node: string | null) => {
      const payload = {
        ...toToolError(node ?? run.graph, error).toJSON(),
        ...(node === null ? {} : { node }),
      };
      logger.error("durable run failed", { threadId, error: payload });
      carryError = undefined;
      await flushWrite({
        frames: [{ type: "run_failed", seq: out.nextSeq(), data: { error: payload } }],
        run: { status: "failed", error: JSON.stringify(payload) },
      });
    };
    try {
      if (graph === undefined)
        throw new DurableError("unknown_graph", `No graph named "${run.graph}" is registered`);
      const journal = new Map<string, JournalRecord>();
      const answers = new Map<string, JournalRecord>();
      for (const record of await store.readJournal(threadId)) {
        (record.key.startsWith("answer:") ? answers : journal).set(
          record.key.startsWith("answer:") ? record.key.slice(7) : record.key,
          record,
        );
      }
      let state = decodeValue(run.state, "state") as State;
      const cursor = decodeValue(run.cursor, "cursor") as Cursor;
      let node = run.node;
      const version = cursor.version ?? 1;
      if (node !== null) checkVersion(graph, run, version, node, cursor.visits[node] ?? 0, journal);
      while (node !== null) {
        const fn = graph.nodeFunction(node);
        if (fn === undefined)
          throw new DurableError("invalid_graph", `Graph "${graph.name}" has no node "${node}"`);
        const visit = cursor.visits[node] ?? 0;
        const runtime: NodeRuntime = new NodeRuntime({
          threadId,
          runId: run.runId,
          node,
          visit,
          toolBase: cursor.tools[node] ?? 0,
          journal,
          answers,
          write: (batch) => flushWrite(batch),
          nextSeq: out.nextSeq,
          retry: options.retry,
          version,
        });
        pending.push({ type: "node_started", seq: out.nextSeq(), data: { node, visit } });
        current.set(threadId, runtime);
        let outcome: Awaited<ReturnType<typeof runNode>>;
        try {
          outcome = await runNode(fn, state, runtime);
        } finally {
          if (current.get(threadId) === runtime) current.delete(threadId);
        }
        const { frames, journal: leftover } = runtime.drain();
        pending.push(...frames);
        if (runtime.fatal !== undefined) throw runtime.fatal;
        if (outcome.kind === "paused") {
          for (const call of runtime.openToolCalls.values()) {
            pending.push({
              type: "tool_call",
              seq: out.nextSeq(),
              data: toFrameData({ ...call, status: "awaiting_approval" }),
            });
          }
          pending.push({
            type: "interrupt",
            seq: out.nextSeq(),
            data: toFrameData({ node, interrupts: runtime.open }),
          });
          await flushWrite({
            journal: leftover,
            run: { status: "paused", interrupts: encodeValue(runtime.open, "the open interrupts") },
          });
          scheduleExpiry(threadId, runtime.open);
          return snapshotOf<State>({ ...run, status: "paused", node }, state, runtime.open);
        }
        if (outcome.kind === "failed") {
          await failRun(outcome.error, node);
          return (await getSnapshot<State>(threadId)) as RunSnapshot<State>;
        }
        const stateDelta = stateDeltaOf(state, outcome.update);
        state = { ...state, ...(outcome.update ?? {}) };
        const next = graph.next(node, state);
        cursor.visits[node] = visit + 1;
        cursor.tools[node] = (cursor.tools[node] ?? 0) + runtime.toolCount;
        pending.push({ type: "node_completed", seq: out.nextSeq(), data: { node, visit, next, stateDelta } });
        if (next === null) {
          pending.push({ type: "run_completed", seq: out.nextSeq(), data: { state: toFrameData(state) } });
        }
        const transition: RunPatch = {
          state: encodeValue(state, `the state after node "${node}"`),
          cursor: encodeCursor(cursor),
          node: next,
          ...(next === null ? { status: "completed" as const } : {}),
        };
        if (next === null) {
          await flushWrite({ journal: leftover, run: transition });
        } else {
          carry = {
            frames: [...(carry?.frames ?? []), ...pending],
            journal: [...(carry?.journal ?? []), ...leftover],
            run: { ...carry?.run, ...transition },
          };
          pending = [];
          setImmediate(() => {
            if (carry === undefined) return;
            flushWrite({}).catch((error: unknown) => {
              carryError ??= error;
            });
          });
        }
        node = next;
      }
      return snapshotOf<State>({ ...run, status: "completed", node: null }, state, []);
    } catch (error) {
      // Fenced: another runner owns the run now; writing anything would be wrong.
      if (DurableError.isInstance(error) && error.code === "run_fenced") {
        logger.warn("durable run taken over by another runner", { threadId });
        return (await getSnapshot<State>(threadId)) as RunSnapshot<State>;
      }
      await failRun(error, null).catch((writeError: unknown) => {
        logger.error("durable run failure could not be recorded", { threadId, error: String(writeError) });
      });
      const stored = await getSnapshot<State>(threadId).catch(() => undefined);
      if (stored !== undefined) return stored;
      throw error;
    }
  }

  const expiryTimers = new Set<NodeJS.Timeout>();
  /** A paused run whose approvals expire is resumed by this runner when the first one does. */
  function scheduleExpiry(threadId: string, open: readonly InterruptRequest[]): void {
    const first = Math.min(...open.map((entry) => expiryOf(entry) ?? Number.POSITIVE_INFINITY));
    if (!Number.isFinite(first)) return;
    const timer = setTimeout(
      () => {
        expiryTimers.delete(timer);
        if (closed) return;
        launchResume(threadId)
          .then((launched) => launched.finished)
          .catch((error: unknown) => {
            logger.warn("durable approval expiry could not resume the run", {
              threadId,
              error: String(error),
            });
          });
      },
      Math.min(2 ** 31 - 1, Math.max(0, first - Date.now()) + 5),
    );
    timer.unref();
    expiryTimers.add(timer);
  }

  async function getSnapshot<State extends object>(
    threadId: string,
  ): Promise<RunSnapshot<State> | undefined> {
    const run = await store.getRun(threadId);
    if (run === undefined) return undefined;
    return snapshotOf<State>(
      run,
      decodeValue(run.state, "state") as State,
      decodeValue(run.interrupts, "interrupts") as InterruptRequest[],
    );
  }

  function track<State extends object>(
    threadId: string,
    finished: Promise<RunSnapshot<State>>,
  ): Promise<RunSnapshot<State>> {
    active.set(threadId, finished);
    const forget = () => {
      if (active.get(threadId) === finished) active.delete(threadId);
    };
    finished.then(forget, forget);
    return finished;
  }

  async function launch<State extends object>(
    graphOrName: Graph<State> | string,
    input: State,
    startOptions: StartOptions = {},
    from?: {
      readonly node: string;
      readonly forkedFrom: { readonly threadId: string; readonly seq: number };
    },
  ): Promise<Launched<State>> {
    const graph = typeof graphOrName === "string" ? graphs.get(graphOrName) : graphOrName;
    if (graph === undefined)
      throw new DurableError("unknown_graph", `No graph named "${String(graphOrName)}" is registered`);
    register(graph);
    if (
      startOptions.runId !== undefined &&
      (typeof startOptions.runId !== "string" || startOptions.runId === "")
    ) {
      throw new DurableError("invalid_request", "`runId` is a non-empty string");
    }
    const threadId = startOptions.threadId ?? randomUUID();
    const runId = startOptions.runId ?? randomUUID();
    const now = new Date().toISOString();
    const existing = startOptions.threadId === undefined ? undefined : await store.getRun(threadId);
    if (existing !== undefined) {
      if (startOptions.runId !== undefined && (await hasRun(threadId, existing, runId))) {
        return idleLaunch<State>(threadId, runId);
      }
      return launchNext(graph, input, existing, runId, startOptions);
    }
    const record: RunRecord = {
      threadId,
      runId,
      graph: graph.name,
      status: "running",
      state: encodeValue(input, "the input"),
      node: from?.node ?? graph.entry(),
      cursor: encodeCursor({ visits: {}, tools: {}, version: graph.version }),
      interrupts: encodeValue([], "interrupts"),
      error: null,
      owner: randomUUID(),
      createdAt: now,
      updatedAt: now,
    };
    const started: Frame = {
      type: "run_started",
      seq: 1,
      data: {
        threadId,
        runId,
        graph: graph.name,
        startedAt: now,
        graphVersion: graph.version,
        next: record.node,
        state: toFrameData(input),
        ...(from === undefined ? {} : { forkedFrom: from.forkedFrom }),
        ...clientRunData(startOptions.clientRun),
      },
    };
    try {
      await store.createRun(record, { frames: [started] });
    } catch (error) {
      // The same start twice at once: the other one created it.
      const raced = DurableError.isInstance(error) && error.code === "thread_exists";
      const current = raced && startOptions.runId !== undefined ? await store.getRun(threadId) : undefined;
      if (current !== undefined && (await hasRun(threadId, current, runId))) {
        return idleLaunch<State>(threadId, runId);
      }
      throw error;
    }
    landed.emit(threadId);
    return { threadId, runId, firstSeq: 1, finished: track(threadId, drive<State>(record, 1)) };
  }

  /** Whether the thread has had a run with this id: its latest, or an earlier one (its `run_started`). */
  async function hasRun(threadId: string, latest: RunRecord, runId: string): Promise<boolean> {
    if (latest.runId === runId) return true;
    const starts = await store.readFrames(threadId, 0, 1_000_000, ["run_started"]);
    return starts.some((frame) => (frame.data as { runId?: unknown } | null)?.runId === runId);
  }

  function runActiveHere(threadId: string): DurableError {
    return new DurableError(
      "run_active",
      `Thread "${threadId}" is running in this process; wait for it to pause`,
    );
  }

  /** The answer to a start or resume repeated: the run as it is, nothing started. */
  function idleLaunch<State extends object>(threadId: string, runId: string): Launched<State> {
    return {
      threadId,
      runId,
      firstSeq: 0,
      finished: getSnapshot<State>(threadId) as Promise<RunSnapshot<State>>,
    };
  }

  /**
   * The next run on a thread whose last run ended: the state carries over (the input is merged on top),
   * and so do the visit and tool-call counters, so journal keys and tool-call ids stay unique in the
   * thread's one journal and frame log.
   */
  async function launchNext<State extends object>(
    graph: Graph<State>,
    input: State,
    existing: RunRecord,
    runId: string,
    startOptions: StartOptions,
  ): Promise<Launched<State>> {
    const { threadId } = existing;
    const busy = () =>
      new DurableError(
        "thread_active",
        `Thread "${threadId}" has a ${existing.status} run (${existing.runId}); resume or cancel it before starting another`,
        { data: { runId: existing.runId, status: existing.status } },
      );
    if (active.has(threadId) || existing.status === "running" || existing.status === "paused") throw busy();
    const carried = decodeValue(existing.state, "state") as object;
    const state = { ...carried, ...input };
    const claimed = await store.claimRun(threadId, randomUUID(), ["completed", "failed", "cancelled"], {
      run: {
        runId,
        graph: graph.name,
        status: "running",
        state: encodeValue(state, "the input"),
        node: graph.entry(),
        cursor: encodeCursor({
          ...(decodeValue(existing.cursor, "cursor") as Cursor),
          version: graph.version,
        }),
        interrupts: encodeValue([], "interrupts"),
        error: null,
      },
    });
    if (claimed === undefined) throw busy();
    const started: Frame = {
      type: "run_started",
      seq: 0,
      data: {
        threadId,
        runId,
        graph: graph.name,
        startedAt: new Date().toISOString(),
        graphVersion: graph.version,
        next: graph.entry(),
        state: toFrameData(state),
        ...clientRunData(startOptions.clientRun),
      },
    };
    return {
      threadId,
      runId,
      firstSeq: claimed.lastSeq + 1,
      finished: track(threadId, drive<State>(claimed.run, claimed.lastSeq, [started])),
    };
  }

  async function launchResume<State extends object>(
    threadId: string,
    given: Answers = {},
    resumeOptions: ResumeOptions = {},
  ): Promise<Launched<State>> {
    const driven = active.has(threadId);
    if (driven && Object.keys(given).length === 0) throw runActiveHere(threadId);
    const run = await store.getRun(threadId);
    if (run === undefined) throw new DurableError("unknown_run", `No run for thread "${threadId}"`);
    if (run.status === "cancelled" && Object.keys(given).length > 0) {
      // Its pending approvals were answered as cancelled: another answer is not a conflict, it is late.
      throw new DurableError(
        "run_cancelled",
        `Thread "${threadId}"'s run ${run.runId} was cancelled; it takes no answers (start a new run)`,
        { data: { runId: run.runId, status: run.status } },
      );
    }
    const stored = new Map<string, unknown>();
    // Steps with an outcome (not a retry's failed try): a takeover counts them to see progress.
    let stepsDone = 0;
    for (const record of await store.readJournal(threadId)) {
      if (record.key.startsWith("answer:")) stored.set(record.key.slice(7), record.value);
      else if ((record.state === "done" || record.state === "failed") && !record.key.includes("@"))
        stepsDone++;
    }
    const fresh = new Map<string, string>();
    for (const [id, answer] of Object.entries(given)) {
      const text = encodeValue(withEditFingerprint(answer), `the answer to "${id}"`);
      const previous = stored.get(id);
      if (previous === undefined) fresh.set(id, text);
      else if (previous !== text) {
        throw new DurableError("answer_conflict", `The interrupt "${id}" was already answered differently`, {
          data: { id },
        });
      }
    }
    if (driven) {
      // A resume replayed (its answers all given already) while the run it resumed runs here: harmless.
      if (fresh.size === 0) return idleLaunch<State>(threadId, run.runId);
      throw runActiveHere(threadId);
    }
    const idle = async (): Promise<Launched<State>> => ({
      threadId,
      runId: run.runId,
      firstSeq: 0,
      finished: getSnapshot<State>(threadId) as Promise<RunSnapshot<State>>,
    });
    if (run.status === "paused") {
      const open = decodeValue(run.interrupts, "interrupts") as InterruptRequest[];
      const openIds = new Set(open.map((entry) => entry.id));
      const unknown = [...fresh.keys()].filter((id) => !openIds.has(id));
      if (unknown.length > 0) {
        throw new DurableError(
          "unknown_interrupt",
          `No open interrupt ${unknown.map((id) => `"${id}"`).join(", ")}`,
          {
            data: { unknown, open: [...openIds] },
          },
        );
      }
      const now = Date.now();
      for (const entry of open) {
        const text = fresh.get(entry.id);
        if (text !== undefined) checkAnswer(entry, decodeValue(text), now);
        else if (!stored.has(entry.id) && (expiryOf(entry) ?? Number.POSITIVE_INFINITY) <= now) {
          // Nobody answered in time: the approval is answered as expired, so the run is not left hanging.
          fresh.set(entry.id, encodeValue(expiredAnswer(entry), `the expiry of "${entry.id}"`));
        }
      }
      // Only old answers again: a replayed resume, harmless.
      if (fresh.size === 0) return idle();
      const missing = [...openIds].filter((id) => !fresh.has(id));
      if (missing.length > 0) {
        throw new DurableError(
          "unanswered_interrupts",
          `Every open interrupt must be answered; missing ${missing.map((id) => `"${id}"`).join(", ")}`,
          { data: { missing } },
        );
      }
      const owner = randomUUID();
      const claimed = await store.claimRun(threadId, owner, ["paused"], {
        journal: [...fresh].map(([id, text]) => ({
          key: `answer:${id}`,
          name: "answer",
          state: "done",
          attempt: 1,
          value: text,
        })),
        run: { status: "running", interrupts: encodeValue([], "interrupts") },
      });
      if (claimed === undefined) return launchResume(threadId, given, resumeOptions);
      const resumed: Frame = {
        type: "run_resumed",
        seq: 0,
        data: { answered: [...fresh.keys()], ...clientRunData(resumeOptions.clientRun) },
      };
      return {
        threadId,
        runId: run.runId,
        firstSeq: claimed.lastSeq + 1,
        finished: track(threadId, drive<State>(claimed.run, claimed.lastSeq, [resumed])),
      };
    }
    if (fresh.size > 0) {
      throw new DurableError(
        "run_not_paused",
        `Thread "${threadId}" is ${run.status}, not paused; nothing to answer`,
        {
          data: { status: run.status },
        },
      );
    }
    // Answers already given (a replayed or raced resume) never take a run over; only a bare resume does.
    if (run.status !== "running" || Object.keys(given).length > 0) return idle();
    // Left running by a process that died: take it over (fencing out the old owner, if it still lives),
    // but only once the run's last write is older than the lease, judged by the store's clock in the
    // claiming transaction (the database's on PostgreSQL), so machines' clocks never decide it.
    const takeovers = await takeoversOf(threadId, stepsDone);
    const owner = randomUUID();
    const claimed = await store.claimRun(threadId, owner, ["running"], {}, { staleAfterMs: leaseMs });
    if (claimed === undefined) return idle();
    if (takeovers >= maxTakeovers) {
      // A poison run: every driver so far died in it. End it, explained, rather than run its step again.
      return {
        threadId,
        runId: run.runId,
        firstSeq: claimed.lastSeq + 1,
        finished: track(threadId, failPoisoned<State>(claimed.run, owner, claimed.lastSeq, takeovers)),
      };
    }
    const recovered: Frame = { type: "run_recovered", seq: 0, data: { stepsDone } };
    return {
      threadId,
      runId: run.runId,
      firstSeq: claimed.lastSeq + 1,
      finished: track(threadId, drive<State>(claimed.run, claimed.lastSeq, [recovered])),
    };
  }

  /**
   * How many times in a row the thread's latest run was taken over with no progress since: its
   * `run_recovered` frames after its last progress mark (its `run_started`, a resume with answers, a
   * pause, a node completed), where a takeover that found more steps done than the one before it
   * counts from 1 again, and none count when steps completed since the last takeover (`stepsDone`
   * now above the one it recorded).
   */
  async function takeoversOf(threadId: string, stepsDone: number): Promise<number> {
    const marks = await store.readFrames(threadId, 0, 1_000_000, [
      "run_started",
      "run_recovered",
      "run_resumed",
      "interrupt",
      "node_completed",
    ]);
    let count = 0;
    let lastSteps: number | undefined;
    for (const frame of marks) {
      if (frame.type !== "run_recovered") {
        count = 0;
        lastSteps = undefined;
        continue;
      }
      const steps = (frame.data as { stepsDone?: unknown } | null)?.stepsDone;
      const recorded = typeof steps === "number" ? steps : undefined;
      count = recorded !== undefined && lastSteps !== undefined && recorded > lastSteps ? 1 : count + 1;
      lastSteps = recorded;
    }
    return lastSteps !== undefined && stepsDone > lastSteps ? 0 : count;
  }

  /** Ends a run taken over once too often as `failed` (`takeover_limit`), writing as its new owner. */
  async function failPoisoned<State extends object>(
    run: RunRecord,
    owner: string,
    lastSeq: number,
    takeovers: number,
  ): Promise<RunSnapshot<State>> {
    const { threadId } = run;
    const inFlight = (await store.readJournal(threadId)).filter((record) => record.state === "started");
    const step = inFlight.at(-1)?.name ?? null;
    const where = `${run.node === null ? "" : ` in node "${run.node}"`}${step === null ? "" : `, step "${step}"`}`;
    const error = new DurableError(
      "takeover_limit",
      `Run taken over ${takeovers} time${takeovers === 1 ? "" : "s"} in a row with no progress (maxTakeovers ${maxTakeovers}) and its driver stopped again${where}; not running it again`,
      { data: { takeovers, maxTakeovers, node: run.node, step } },
    );
    const payload = {
      ...toToolError(run.graph, error).toJSON(),
      ...(run.node === null ? {} : { node: run.node }),
    };
    logger.error("durable run failed: taken over too many times", { threadId, error: payload });
    await store.commit(threadId, owner, {
      frames: [{ type: "run_failed", seq: lastSeq + 1, data: { error: payload } }],
      run: { status: "failed", error: JSON.stringify(payload) },
    });
    landed.emit(threadId);
    return (await getSnapshot<State>(threadId)) as RunSnapshot<State>;
  }

  /** The recovery sweep: takes over runs of this runner's graphs that no live driver vouches for. */
  const sweepEveryMs =
    options.recover === false || leaseMs <= 0 ? 0 : Math.max(1000, options.recover?.everyMs ?? leaseMs);
  const sweepBatch = Math.max(1, Math.floor(options.recover === false ? 1 : (options.recover?.batch ?? 16)));
  let sweepTimer: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> = Promise.resolve();

  async function sweep(): Promise<void> {
    const names = [...graphs.keys()];
    if (names.length === 0) return;
    let stale: string[];
    try {
      stale = await store.findStaleRuns({ staleAfterMs: leaseMs, graphs: names, limit: sweepBatch });
    } catch (error) {
      logger.warn("durable recovery sweep could not read the store", { error: String(error) });
      return;
    }
    for (const threadId of stale) {
      if (closed) return;
      if (active.has(threadId)) continue;
      try {
        // The bare resume's claim: refused (run_active) unless the run is still silent for the lease
        // by the store's clock, under the row lock, so racing runners take it once between them.
        const launched = await launchResume(threadId);
        if (launched.firstSeq === 0) continue;
        logger.warn("durable run recovered by the sweep", { threadId, runId: launched.runId });
        launched.finished.catch(() => {});
      } catch (error) {
        if (DurableError.isInstance(error) && error.code === "run_active") continue;
        logger.warn("durable recovery sweep could not take a run over", { threadId, error: String(error) });
      }
    }
  }

  function scheduleSweep(delayMs: number): void {
    sweepTimer = setTimeout(() => {
      sweeping = sweep().finally(() => {
        if (!closed) scheduleSweep(sweepEveryMs);
      });
    }, delayMs);
    sweepTimer.unref();
  }
  // Runners started together spread their first looks over the interval.
  if (sweepEveryMs > 0) scheduleSweep(Math.round(sweepEveryMs * (0.5 + Math.random() / 2)));

  /** The run's end, or, once `signal` aborts, its cancellation and a rejection with `aborted`. */
  function untilCancelled<State extends object>(
    launched: Launched<State>,
    signal: AbortSignal | undefined,
    name: string,
  ): Promise<RunSnapshot<State>> {
    if (signal === undefined) return launched.finished;
    return new Promise<RunSnapshot<State>>((resolve, reject) => {
      // Once aborted, the call's answer is `aborted`, even when the cancel ends the run first.
      let aborting = false;
      const onAbort = () => {
        aborting = true;
        const aborted = new ToolAbortedError(name, signal.reason);
        // The run is cancelled first, so the caller that sees `aborted` finds it cancelled.
        cancel(launched.threadId, "the caller aborted").then(
          () => reject(aborted),
          // It paused or ended as the abort came: nothing is left to cancel.
          () => reject(aborted),
        );
      };
      if (signal.aborted) onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      launched.finished
        .then(
          (snapshot) => {
            if (!aborting) resolve(snapshot);
          },
          (error: unknown) => {
            if (!aborting) reject(error);
          },
        )
        .finally(() => signal.removeEventListener("abort", onAbort));
    });
  }

  async function cancel<State extends object>(
    threadId: string,
    reason = "cancelled",
  ): Promise<RunSnapshot<State>> {
    const run = await store.getRun(threadId);
    if (run === undefined) throw new DurableError("unknown_run", `No run for thread "${threadId}"`);
    if (run.status === "cancelled") return (await getSnapshot<State>(threadId)) as RunSnapshot<State>;
    if (run.status !== "running" && run.status !== "paused") {
      throw new DurableError(
        "run_not_active",
        `Thread "${threadId}" is ${run.status}; there is nothing to cancel`,
        {
          data: { status: run.status },
        },
      );
    }
    const runtime = current.get(threadId);
    // In-flight steps here see their signals abort at once; another process's, at its next write.
    runtime?.abort(new DurableError("run_cancelled", `The run was cancelled: ${reason}`));
    const owner = randomUUID();
    const claimed = await store.claimRun(threadId, owner, ["running", "paused"]);
    if (claimed === undefined) return (await getSnapshot<State>(threadId)) as RunSnapshot<State>;
    let seq = claimed.lastSeq;
    const frames: Frame[] = [];
    const journal: JournalRecord[] = [];
    const cards = new Map<string, { name: string; params: unknown }>();
    for (const call of runtime?.openToolCalls.values() ?? []) cards.set(call.id, call);
    for (const entry of decodeValue(claimed.run.interrupts, "interrupts") as InterruptRequest[]) {
      const request = (entry.request ?? {}) as {
        kind?: string;
        toolCallId?: string;
        toolName?: string;
        params?: unknown;
      };
      if (request.kind !== "approval") continue;
      // The pending approval is answered as cancelled, in the journal and on its card.
      journal.push({
        key: `answer:${entry.id}`,
        name: "answer",
        state: "done",
        attempt: 1,
        value: encodeValue({ approved: false, cancelled: true, reason }, "the cancellation"),
      });
      if (request.toolCallId !== undefined) {
        cards.set(request.toolCallId, { name: request.toolName ?? "tool", params: request.params });
      }
    }
    for (const [id, card] of cards) {
      frames.push({
        type: "tool_call",
        seq: ++seq,
        data: toFrameData({ id, name: card.name, status: "cancelled", params: card.params, reason }),
      });
    }
    frames.push({ type: "run_cancelled", seq: ++seq, data: { reason } });
    await store.commit(threadId, owner, {
      frames,
      journal,
      run: { status: "cancelled", interrupts: encodeValue([], "interrupts") },
    });
    landed.emit(threadId);
    logger.info("durable run cancelled", { threadId, runId: run.runId, reason });
    return (await getSnapshot<State>(threadId)) as RunSnapshot<State>;
  }

  const lifecycleTypes = [
    "run_started",
    "run_resumed",
    "interrupt",
    "run_completed",
    "run_failed",
    "run_cancelled",
  ];

  async function runsOf(threadId: string): Promise<RunSummary[]> {
    const run = await store.getRun(threadId);
    if (run === undefined) throw new DurableError("unknown_run", `No run for thread "${threadId}"`);
    const runs: { -readonly [K in keyof RunSummary]: RunSummary[K] }[] = [];
    const ended: Record<string, RunStatus> = {
      interrupt: "paused",
      run_resumed: "running",
      run_completed: "completed",
      run_failed: "failed",
      run_cancelled: "cancelled",
    };
    let afterSeq = 0;
    for (;;) {
      const page = await store.readFrames(threadId, afterSeq, 1000, lifecycleTypes);
      for (const frame of page) {
        const data = (frame.data ?? {}) as { runId?: unknown; graph?: unknown; startedAt?: unknown };
        if (frame.type === "run_started") {
          const previous = runs.at(-1);
          if (previous !== undefined) previous.lastSeq = frame.seq - 1;
          runs.push({
            runId: String(data.runId),
            graph: String(data.graph),
            status: "running",
            firstSeq: frame.seq,
            ...(typeof data.startedAt === "string" ? { startedAt: data.startedAt } : {}),
          });
        } else {
          const last = runs.at(-1);
          const status = ended[frame.type];
          if (last !== undefined && status !== undefined) last.status = status;
        }
      }
      if (page.length < 1000) break;
      afterSeq = page.at(-1)?.seq ?? afterSeq;
    }
    const latest = runs.at(-1);
    if (latest !== undefined && latest.runId === run.runId) latest.status = run.status;
    return runs;
  }

  async function framesOf(threadId: string, frameOptions: FramesOptions = {}): Promise<Frame[]> {
    const afterSeq = frameOptions.afterSeq ?? 0;
    if (frameOptions.runId === undefined)
      return store.readFrames(threadId, afterSeq, frameOptions.limit, frameOptions.types);
    const entry = (await runsOf(threadId)).find((candidate) => candidate.runId === frameOptions.runId);
    if (entry === undefined) {
      throw new DurableError("unknown_run", `Thread "${threadId}" has no run "${frameOptions.runId}"`);
    }
    const frames = await store.readFrames(
      threadId,
      Math.max(afterSeq, entry.firstSeq - 1),
      frameOptions.limit,
      frameOptions.types,
    );
    return entry.lastSeq === undefined
      ? frames
      : frames.filter((frame) => frame.seq <= (entry.lastSeq as number));
  }

  async function history<State extends object>(
    threadId: string,
    historyOptions: HistoryOptions = {},
  ): Promise<Checkpoint<State>[]> {
    if ((await store.getRun(threadId)) === undefined)
      throw new DurableError("unknown_run", `No run for thread "${threadId}"`);
    const frames = await store.readFrames(threadId, 0, 1_000_000, historyFrameTypes);
    return checkpointsOf<State>(frames, historyOptions);
  }

  async function fork<State extends object>(threadId: string, forkOptions: ForkOptions<State>) {
    const { seq, signal } = forkOptions;
    const checkpoint = (await history<State>(threadId)).find((entry) => entry.seq === seq);
    if (checkpoint === undefined) {
      throw new DurableError(
        "invalid_request",
        `Thread "${threadId}" has no checkpoint at seq ${seq} (see history)`,
        {
          data: { seq },
        },
      );
    }
    if (checkpoint.next === null) {
      throw new DurableError(
        "invalid_request",
        `Nothing runs after the checkpoint at seq ${seq}: its run ended there`,
        {
          data: { seq },
        },
      );
    }
    const graph = graphs.get(checkpoint.graph);
    if (graph === undefined)
      throw new DurableError("unknown_graph", `No graph named "${checkpoint.graph}" is registered`);
    const newThreadId = forkOptions.threadId ?? randomUUID();
    if ((await store.getRun(newThreadId)) !== undefined) {
      throw new DurableError(
        "thread_exists",
        `Thread "${newThreadId}" exists; a fork starts a thread of its own`,
      );
    }
    if (signal?.aborted) throw new ToolAbortedError("durable.fork", signal.reason);
    const input = { ...checkpoint.state, ...(forkOptions.input ?? {}) } as State;
    const launched = await launch<State>(
      graph,
      input,
      { threadId: newThreadId, ...(forkOptions.runId === undefined ? {} : { runId: forkOptions.runId }) },
      { node: checkpoint.next, forkedFrom: { threadId, seq } },
    );
    return untilCancelled(launched, signal, "durable.fork");
  }

  return {
    cancel,
    history,
    fork,
    runs: runsOf,
    async threads(query = {}) {
      const records = await store.listThreads(query);
      return records.map((record) => ({
        threadId: record.threadId,
        runId: record.runId,
        graph: record.graph,
        status: record.status,
        createdAt: record.createdAt,
        updatedAt: record.updatedAt,
      }));
    },
    async deleteThread(threadId) {
      const run = await store.getRun(threadId);
      if (run === undefined) return false;
      if (active.has(threadId) || run.status === "running") {
        throw new DurableError("thread_active", `Thread "${threadId}" has a running run; cancel it first`, {
          data: { runId: run.runId, status: run.status },
        });
      }
      return store.deleteThread(threadId);
    },
    async prune(pruneOptions) {
      if (!(Number.isFinite(pruneOptions.olderThanMs) && pruneOptions.olderThanMs >= 0)) {
        throw new DurableError("invalid_request", "olderThanMs is a number of milliseconds ≥ 0");
      }
      return store.pruneThreads({
        ...(pruneOptions.prefix === undefined ? {} : { prefix: pruneOptions.prefix }),
        updatedBefore: new Date(Date.now() - pruneOptions.olderThanMs).toISOString(),
        statuses: pruneOptions.statuses ?? ["completed", "failed", "cancelled"],
      });
    },
    async start(graph, input, startOptions = {}) {
      const { signal, ...launchOptions } = startOptions;
      if (signal?.aborted) throw new ToolAbortedError("durable.start", signal.reason);
      return untilCancelled(await launch(graph, input, launchOptions), signal, "durable.start");
    },
    launch,
    async resume(threadId, answers, resumeOptions = {}) {
      const { signal, ...launchOptions } = resumeOptions;
      if (signal?.aborted) throw new ToolAbortedError("durable.resume", signal.reason);
      const launched = await launchResume(threadId, answers, launchOptions);
      return untilCancelled(launched, signal, "durable.resume") as never;
    },
    launchResume,
    get: getSnapshot,
    frames: framesOf,
    watch: (threadId, watchOptions) => watchFrames(store, landed, pollIntervalMs, threadId, watchOptions),
    async idle() {
      await Promise.allSettled([...active.values()]);
    },
    async close() {
      closed = true;
      clearTimeout(sweepTimer);
      await sweeping;
      for (const timer of expiryTimers) clearTimeout(timer);
      await Promise.allSettled([...active.values()]);
      if (typeof options.store !== "object") await store.close();
    },
  };
}

function clientRunData(clientRun: ClientRun | undefined): Record<string, unknown> {
  if (clientRun === undefined) return {};
  return {
    clientRunId: clientRun.runId,
    ...(clientRun.messages === undefined ? {} : { clientMessages: toFrameData(clientRun.messages) }),
  };
}

/**
 * The cursor is counters keyed by node name (`[A-Za-z0-9_.-]`), so its codec text is plain JSON: written
 * directly, as the codec would, without the codec's per-value walk (it is written at every transition).
 */
function encodeCursor(cursor: Cursor): string {
  return JSON.stringify({ v: codecVersion, value: cursor });
}
