/**
 * A host worker (ADR 0478): the thread that holds one document's copy of the replica, its run doc and
 * projection (the document cache, ADR 0464), and does every run's host work on it — the binding calls
 * the sandbox worker asks on the run's own channel, `materialize`, and the finish step (uploads, file
 * facts, checks, preview, export). The tool's thread only hands it the replica's updates and answers its
 * hooks and row reads; a run whose host work passes the run's limit is ended by the tool's thread
 * terminating this worker, which cannot wait on it.
 */
import { type MessagePort, parentPort } from "node:worker_threads";
import { LoroDoc } from "loro-crdt";
import { keepLoroHeadroom, sizeLoroHeadroom } from "../document/loro-memory.ts";
import { readyForImports } from "../document/ready-for-imports.ts";
import { toFailure } from "../sandbox/run-gate.ts";
import type { HostChannelCall, SandboxFailure, SyncAnswer } from "../sandbox/sandbox-protocol.ts";
import { type CheckedOutDocument, createDocumentCache } from "./document-cache.ts";
import { loroBytes, type RetainedBudget, retainedBudget } from "./host-retained.ts";
import { rehearseRun } from "./run-rehearsal.ts";
import { loadSchema, openRunSession, type RunSession } from "./run-session.ts";
import {
  answerWaiting,
  type FromHostWorker,
  hostGone,
  hostWorking,
  overRetained,
  type ToHostWorker,
} from "./session-wire.ts";

const port = parentPort!;
const cache = createDocumentCache();
/** The worker's copy of its document's replica, kept in step by the updates the tool's thread sends. */
let replica: LoroDoc | undefined;
/** Loro's memory once the worker had opened its document: what runs grew it by is measured from here. */
let loroAtOpen: number | undefined;
interface HostedRunState {
  readonly session: RunSession;
  readonly checkedOut: CheckedOutDocument;
  readonly channel: MessagePort;
  readonly budget: RetainedBudget;
  readonly signal: Int32Array;
}
const runs = new Map<number, HostedRunState>();
const asked = new Map<number, { resolve(value: unknown): void; reject(error: unknown): void }>();
let nextCallId = 1;

function send(message: FromHostWorker): void {
  port.postMessage(message);
}

/** Asks the tool's thread (a hook or a row read) and waits for its answer. */
function ask(
  message:
    | { type: "hook"; runId: number; method: string; payload: unknown }
    | { type: "rows"; lookups: unknown }
    | { type: "stage"; part: Uint8Array },
): Promise<unknown> {
  const callId = nextCallId++;
  return new Promise((resolve, reject) => {
    asked.set(callId, { resolve, reject });
    send({ ...message, callId } as FromHostWorker);
  });
}

/** An answer that cannot cross between threads fails the call at once, saying what did not cross. */
function post(
  target: { postMessage(value: unknown): void },
  answer: { callId: number; ok: boolean; value?: unknown; error?: SandboxFailure },
  extra: object = {},
): void {
  try {
    target.postMessage({ ...extra, ...answer });
  } catch (error) {
    target.postMessage({
      ...extra,
      callId: answer.callId,
      ok: false,
      error: {
        code: "host_call_failed",
        message: `the host's answer cannot cross to the script: ${(error as Error).message}`,
      },
    });
  }
}

async function answered(
  work: () => Promise<unknown>,
): Promise<{ ok: boolean; value?: unknown; error?: SandboxFailure }> {
  try {
    return { ok: true, value: await work() };
  } catch (error) {
    return { ok: false, error: toFailure(error, "host_call_failed") };
  }
}

/**
 * `work` of a run, held to the run's retained bytes (ADR 0490): refused once the run is over its limit,
 * and checked after it is done. A run found over its limit has its signal say so (read by the tool's
 * thread when the run ends) and its host "gone", so the sandbox stops the script at once.
 */
async function bounded<T>(run: HostedRunState, work: () => Promise<T>): Promise<T> {
  checkRetained(run);
  const value = await work();
  checkRetained(run);
  return value;
}

function checkRetained(run: HostedRunState): void {
  if (!run.budget.over()) return;
  Atomics.store(run.signal, overRetained, 1);
  Atomics.store(run.signal, hostGone, 1);
  throw run.budget.failure();
}

/** What a hook's payload hands on to be kept (an upload's text), in bytes. */
function handedOn(method: string, payload: unknown): number {
  const text = method === "uploadText" ? (payload as { text?: unknown } | null)?.text : undefined;
  return typeof text === "string" ? Buffer.byteLength(text) : 0;
}

/** The rows of the worker's document on demand, asked of the tool's thread. */
function rowsSource(rows: { readonly wholeUpTo: number } | undefined) {
  return rows === undefined
    ? undefined
    : {
        source: (lookups: unknown) => ask({ type: "rows", lookups }) as never,
        wholeUpTo: rows.wholeUpTo,
      };
}

/** `prepare`s in progress, in the order they came: a run opened meanwhile waits for them. */
let preparing: Promise<unknown> = Promise.resolve();
/**
 * Prepared, and no run opened since: the first run's catch-up (the plan committed after the replaced
 * worker's last run, say) is the document's growth, as a fresh worker's first import is, not runs'.
 */
let preparedOnly = false;
/** A `prepare` failed: what the worker holds may lack updates the tool's thread counts it as holding. */
let unusable: string | undefined;

/**
 * Holds the document before a run asks: imported, its run document checked out (ADR 0495), or, for a
 * kept worker, caught up with a committed plan (ADR 0498).
 */
function prepare(message: Extract<ToHostWorker, { type: "prepare" }>): void {
  preparing = preparing.then(() =>
    answered(async () => {
      try {
        for (const update of message.updates) {
          replica ??= new LoroDoc();
          replica.import(update);
        }
        if (replica === undefined) return { reads: null };
        readyForImports(replica);
        const schema = await loadSchema(message.schema.module, message.schema.exportName);
        cache.checkout(message.key, replica, schema, message.limits, rowsSource(message.rows)).release();
        // The headroom the next run's first write would make (ADR 0502) is made now: growing Loro's memory
        // starts a full marking of this thread's heap, paid here rather than in that run.
        keepLoroHeadroom();
      } catch (error) {
        unusable ??= (error as Error).message;
        throw error;
      }
      if (message.catchUp !== true) preparedOnly = true;
      // How the worker now reads the document: a run opened on it asks the server nothing to decide.
      return { reads: cache.readsOf(message.key) ?? null };
    })
      .then((answer) => post(port, { callId: message.callId, ...answer }, { type: "answer" }))
      // Once, after the answer: a run opened meanwhile waits for it (its Loro memory is not the run's).
      .then(() => (rehearsed ? undefined : rehearseOnce(message.schema))),
  );
}

/**
 * Whether this worker has rehearsed a run (`rehearseRun`) or run one: a worker made ready before its
 * first run (the successor of an outgrown one) rehearses once it holds its document.
 */
let rehearsed = false;

/** Never rejects: a run opened after it waits on it (`preparing`). */
async function rehearseOnce(schema: { module: string; exportName: string }): Promise<void> {
  rehearsed = true;
  await loadSchema(schema.module, schema.exportName)
    .then(rehearseRun)
    .catch(() => undefined);
}

async function open(message: Extract<ToHostWorker, { type: "open" }>): Promise<void> {
  await preparing;
  const { runId, channel, signal } = {
    runId: message.runId,
    channel: message.port,
    signal: new Int32Array(message.signal),
  };
  const result = await answered(async () => {
    for (const update of message.updates) {
      replica ??= new LoroDoc();
      replica.import(update);
    }
    // The copy read anew pays now what the catch-ups' imports would (ADR 0504): the document's growth.
    if (replica !== undefined) readyForImports(replica);
    if (replica === undefined || unusable !== undefined)
      throw Object.assign(
        new Error(`the host worker holds no document${unusable === undefined ? "" : ` (${unusable})`}`),
        { code: "run_failed" },
      );
    const schema = await loadSchema(message.schema.module, message.schema.exportName);
    const checkedOut = cache.checkout(message.key, replica, schema, message.limits, rowsSource(message.rows));
    if (preparedOnly) loroAtOpen = undefined;
    preparedOnly = false;
    // A run compiles the run's code itself: no rehearsal after it.
    rehearsed = true;
    loroAtOpen ??= loroBytes();
    const budget = retainedBudget(message.retainedBytes);
    sizeLoroHeadroom(message.retainedBytes);
    const session = openRunSession(message.input, schema, checkedOut.document, {
      call: (method, payload) =>
        bounded(state, async () => {
          budget.charge(handedOn(method, payload));
          return await ask({ type: "hook", runId, method, payload });
        }),
      reading: (work) => budget.reading(work),
      ...(message.rows?.stages === true
        ? { stage: (part: Uint8Array) => ask({ type: "stage", part }) as Promise<{ staged: boolean }> }
        : {}),
    });
    const state: HostedRunState = { session, checkedOut, channel, budget, signal };
    runs.set(runId, state);
    // The run's sync binding calls, one at a time: the sandbox worker waits on each.
    channel.on("message", (call: HostChannelCall) => {
      Atomics.store(signal, hostWorking, 1);
      void answered(() => bounded(state, () => session.callFilled(...scriptCall(call)))).then((answer) => {
        post(channel, { callId: call.callId, ...answer } satisfies SyncAnswer);
        Atomics.store(signal, hostWorking, 0);
        Atomics.store(signal, answerWaiting, 1);
        Atomics.notify(signal, answerWaiting);
      });
    });
    return { reads: cache.readsOf(message.key) ?? null };
  });
  post(port, { callId: message.callId, ...result }, { type: "answer" });
}

/** A binding call as the sandbox worker sent it: `{ binding, method, args }`. */
function scriptCall(call: HostChannelCall): [string, string, readonly unknown[]] {
  const payload = call.payload as { binding?: unknown; method?: unknown; args?: unknown } | null;
  if (
    call.method !== "script" ||
    typeof payload?.binding !== "string" ||
    typeof payload.method !== "string" ||
    !Array.isArray(payload.args)
  )
    throw Object.assign(new Error("a script call names its binding, method and arguments"), {
      code: "invalid_request",
    });
  return [payload.binding, payload.method, payload.args];
}

function close(runId: number): void {
  const run = runs.get(runId);
  if (run === undefined) return;
  runs.delete(runId);
  run.channel.close();
  run.checkedOut.release();
  const openBytes = loroAtOpen ?? loroBytes();
  send({ type: "closed", runId, openBytes, grownBytes: loroBytes() - openBytes });
}

port.on("message", (message: ToHostWorker) => {
  switch (message.type) {
    case "open":
      void open(message);
      return;
    case "prepare":
      prepare(message);
      return;
    case "call-async":
    case "finish": {
      const run = runs.get(message.runId);
      void answered(async () => {
        if (run === undefined) throw Object.assign(new Error("the run has ended"), { code: "run_ended" });
        if (message.type === "call-async")
          return await bounded(run, () =>
            run.session.callAsync(message.binding, message.method, message.args),
          );
        return await bounded(run, async () => {
          const plan = await run.session.finish(message.outcome);
          // The plan's update is kept with the plan until it is committed or dropped.
          run.budget.charge(plan.update.byteLength);
          return plan;
        });
      }).then((answer) => post(port, { callId: message.callId, ...answer }, { type: "answer" }));
      return;
    }
    case "close":
      close(message.runId);
      return;
    case "answer": {
      const waiting = asked.get(message.callId);
      if (waiting === undefined) return;
      asked.delete(message.callId);
      if (message.ok) waiting.resolve(message.value);
      else
        waiting.reject(
          Object.assign(new Error(message.error?.message ?? "the host's call failed"), message.error),
        );
      return;
    }
  }
});

send({ type: "ready" });
