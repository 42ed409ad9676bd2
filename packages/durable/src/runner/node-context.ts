/**
 * The context a node receives, and the per-execution runtime behind it: journaled steps, interrupts,
 * frames, and the pause that ends a node.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { setImmediate as nextTurn } from "node:timers/promises";
import { decodeValue, encodeValue } from "../codec/codec.ts";
import { DurableError } from "../errors/durable-error.ts";
import { Interrupt, type InterruptRequest, isInterrupt } from "../interrupt/interrupt.ts";
import type { CommitBatch, Frame, JournalRecord } from "../store/durable-store.ts";
import { toFrameData } from "./frame-data.ts";
import {
  attemptsOf,
  checkStepOptions,
  delayBefore,
  pause,
  type RetryPolicy,
  runTry,
  type StepOptions,
  worthRetrying,
} from "./step-policy.ts";

/** What a step's function learns about itself. */
export interface StepInfo {
  /** `${runId}:${stepKey}`: the same on a crash-window re-run, so a side effect can deduplicate. */
  readonly idempotencyKey: string;
  /**
   * 1 on the first try; one more for each retry under the step's policy, and for a re-run after a crash
   * between `fn` starting and its outcome landing.
   */
  readonly attempt: number;
  readonly key: string;
  /** Aborts when this try times out, or when the node pauses or the run is cancelled. */
  readonly signal: AbortSignal;
}

export interface InterruptOptions {
  /** A stable id of your own; by default the interrupt's position in the node. */
  readonly id?: string;
}

export interface NodeContext {
  readonly threadId: string;
  readonly runId: string;
  readonly node: string;
  /** How many times this node ran before in this run (0 on its first visit). */
  readonly visit: number;
  /** The graph version this run started on: code kept for older runs branches on it. */
  readonly version: number;
  /** Aborts when the node pauses or the run is cancelled: hand it to model calls so they stop. */
  readonly signal: AbortSignal;
  /** Of the step running now (inside `step`), else of this node execution. */
  readonly idempotencyKey: string;
  /**
   * Runs `fn` once per run: its result (or error) is journaled before the next step starts and replayed
   * after. `options.retry` tries again on transient errors (each failed try journaled with its error,
   * under the same idempotency key with the next attempt number); `options.timeoutMs` bounds each try.
   */
  step<T>(name: string, fn: (info: StepInfo) => T | Promise<T>, options?: StepOptions): Promise<T>;
  /** Pauses the run for a human on the first pass; returns the answer once the run is resumed with it. */
  interrupt<Answer = unknown>(request: unknown, options?: InterruptOptions): Promise<Answer>;
  /** Appends a frame of your own (persisted with the run's next write). */
  emit(type: string, data: unknown): void;
}

/** For `tool()`: frames that ride in the same commit as the step's records, only when `fn` runs. */
export interface StepHooks<T> {
  /** Before the `started` record: `fn` is about to run (a first run or a crash-window re-run). */
  onStart?(info: StepInfo): void;
  onResult?(value: T): void;
  onError?(error: unknown): void;
  /** A try failed and another follows after `delayMs`. */
  onRetry?(error: unknown, info: StepInfo, delayMs: number): void;
  /** The outcome came from the journal: its frames were persisted by the pass that recorded it. */
  onReplay?(): void;
}

/** An open tool call, for closing it before the interrupt frame. */
export interface OpenToolCall {
  readonly id: string;
  readonly name: string;
  readonly params: unknown;
}

interface Scope {
  readonly runtime: NodeRuntime;
  readonly prefix: string;
  counter: number;
  readonly info?: StepInfo;
}

const scopes = new AsyncLocalStorage<Scope>();
const runtimes = new WeakMap<NodeContext, NodeRuntime>();

/** The runtime behind a context, for `tool()`, `approve()` and the integrations. */
export function runtimeOf(ctx: NodeContext): NodeRuntime {
  const runtime = runtimes.get(ctx);
  if (runtime === undefined) {
    throw new DurableError("invalid_context", "This is not a node context of @tackle/durable");
  }
  return runtime;
}

export interface RuntimeOptions {
  readonly threadId: string;
  readonly runId: string;
  readonly node: string;
  readonly visit: number;
  /** Tool-call ids this node already used in earlier visits. */
  readonly toolBase: number;
  readonly journal: Map<string, JournalRecord>;
  readonly answers: Map<string, JournalRecord>;
  /** Appends frames and journal records in order; resolves when durable. */
  readonly write: (batch: CommitBatch) => Promise<void>;
  readonly nextSeq: () => number;
  /** The graph version the run started on. */
  readonly version?: number;
  /** The runner's retry policy for steps that give none (`createRunner({ retry })`). */
  readonly retry?: RetryPolicy | undefined;
}

export class NodeRuntime {
  readonly options: RuntimeOptions;
  readonly context: NodeContext;
  readonly open: InterruptRequest[] = [];
  readonly openToolCalls = new Map<string, OpenToolCall>();
  /** An error that fails the run even if the node catches it (journal mismatch, decode failure, a lost write). */
  fatal: unknown;
  toolCount = 0;
  approvalCount = 0;
  private readonly root: Scope;
  private readonly controller = new AbortController();
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly interruptIds = new Set<string>();
  private pendingFrames: Frame[] = [];
  private pendingJournal: JournalRecord[] = [];
  private flushScheduled = false;
  private closed = false;
  private pauseRaised: (() => void) | undefined;
  readonly paused: Promise<void>;

  constructor(options: RuntimeOptions) {
    this.options = options;
    this.root = { runtime: this, prefix: `${options.node}#${options.visit}`, counter: 0 };
    this.paused = new Promise((resolve) => {
      this.pauseRaised = resolve;
    });
    const runtime = this;
    const context: NodeContext = {
      threadId: options.threadId,
      runId: options.runId,
      node: options.node,
      visit: options.visit,
      version: options.version ?? 1,
      signal: this.controller.signal,
      get idempotencyKey() {
        const scope = runtime.scope();
        return scope.info?.idempotencyKey ?? `${options.runId}:${runtime.root.prefix}`;
      },
      step: (name, fn, stepOptions) => this.step(name, fn, {}, stepOptions),
      interrupt: (request, interruptOptions) => this.interrupt(request, interruptOptions),
      emit: (type, data) => this.emit(type, data),
    };
    this.context = Object.freeze(context);
    runtimes.set(this.context, this);
  }

  get isPaused(): boolean {
    return this.open.length > 0;
  }

  /** The next replay-stable tool-call id of this node: `<node>:tool:<n>`. */
  nextToolCallId(): string {
    return `${this.options.node}:tool:${this.options.toolBase + this.toolCount++}`;
  }

  emit(type: string, data: unknown): void {
    if (this.closed) return;
    checkFrameType(type);
    this.pendingFrames.push({ type, seq: 0, data: toFrameData(data, `the data of frame "${type}"`) });
    this.scheduleFlush();
  }

  step<T>(
    name: string,
    fn: (info: StepInfo) => T | Promise<T>,
    hooks: StepHooks<T> = {},
    stepOptions: StepOptions = {},
  ): Promise<T> {
    try {
      this.refuseWhenClosed();
      checkStepOptions(stepOptions, `step "${name}"`);
    } catch (error) {
      return Promise.reject(error);
    }
    const scope = this.scope();
    const key = `${scope.prefix}/${scope.counter++}`;
    const running = this.runStep(key, name, fn, hooks, stepOptions);
    this.track(running);
    return running;
  }

  interrupt<Answer>(request: unknown, options: InterruptOptions = {}): Promise<Answer> {
    try {
      this.refuseWhenClosed();
    } catch (error) {
      return Promise.reject(error);
    }
    const scope = this.scope();
    const position = `${scope.prefix}/${scope.counter++}`;
    const id = options.id ?? position;
    if (this.interruptIds.has(id)) {
      return Promise.reject(
        this.fail(
          new DurableError(
            "duplicate_interrupt",
            `The interrupt id "${id}" is used twice in one node execution`,
          ),
        ),
      );
    }
    this.interruptIds.add(id);
    const answer = this.options.answers.get(id);
    if (answer !== undefined) {
      try {
        return Promise.resolve(decodeValue(answer.value ?? "", `answer "${id}"`) as Answer);
      } catch (error) {
        return Promise.reject(this.fail(error));
      }
    }
    let shown: unknown;
    try {
      shown = decodeValue(encodeValue(request, `the request of interrupt "${id}"`));
    } catch (error) {
      return Promise.reject(error);
    }
    const entry = { id, request: shown };
    this.open.push(entry);
    if (this.open.length === 1) {
      this.controller.abort(new Interrupt(this.open));
      this.pauseRaised?.();
    }
    return Promise.reject(new Interrupt([entry]));
  }

  /** Waits until every step in flight has landed and no new one starts; then nothing more is written. */
  async settle(): Promise<void> {
    for (;;) {
      while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
      // A node that returned is done; a paused one gets a turn for parallel siblings to ask too.
      if (!this.isPaused) break;
      await nextTurn();
      if (this.inFlight.size === 0) break;
    }
    this.closed = true;
  }

  /** Frames and journal records not yet written, handed to the runner's closing commit. */
  drain(): { frames: Frame[]; journal: JournalRecord[] } {
    const frames = this.pendingFrames.map((frame) => ({ ...frame, seq: this.options.nextSeq() }));
    const journal = this.pendingJournal;
    this.pendingFrames = [];
    this.pendingJournal = [];
    return { frames, journal };
  }

  /** Pushes a frame to go out with the next write (tool() frames, so they land with their record). */
  queueFrame(type: string, data: unknown): void {
    if (this.closed) return;
    this.pendingFrames.push({ type, seq: 0, data: toFrameData(data, `the data of frame "${type}"`) });
  }

  scheduleFlush(): void {
    if (this.flushScheduled || this.closed) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      if (this.closed || (this.pendingFrames.length === 0 && this.pendingJournal.length === 0)) return;
      this.track(this.write({}).catch(() => {}));
    });
  }

  private scope(): Scope {
    const scope = scopes.getStore();
    return scope !== undefined && scope.runtime === this ? scope : this.root;
  }

  private track(promise: Promise<unknown>): void {
    this.inFlight.add(promise);
    const forget = () => this.inFlight.delete(promise);
    promise.then(forget, forget);
  }

  private refuseWhenClosed(): void {
    if (this.closed) throw new Interrupt(this.open);
    if (this.fatal !== undefined) throw this.fatal;
  }

  private fail(error: unknown): unknown {
    this.fatal ??= error;
    return error;
  }

  private async write(batch: { journal?: JournalRecord[] }): Promise<void> {
    const { frames, journal } = this.drain();
    try {
      await this.options.write({ frames, journal: [...journal, ...(batch.journal ?? [])] });
    } catch (error) {
      throw this.fail(error);
    }
  }

  /** Aborts the node's signal (a cancel): in-flight steps see it on their own signals too. */
  abort(reason: unknown): void {
    this.controller.abort(reason);
  }

  private async runStep<T>(
    key: string,
    name: string,
    fn: (info: StepInfo) => T | Promise<T>,
    hooks: StepHooks<T>,
    stepOptions: StepOptions,
  ): Promise<T> {
    const label = `of step "${name}" (${key})`;
    const recorded = this.options.journal.get(key);
    if (recorded !== undefined && recorded.name !== name) {
      throw this.fail(
        new DurableError(
          "journal_mismatch",
          `Journal mismatch at ${key}: the run recorded step "${recorded.name}" there, this pass asks for "${name}"; a node must call its steps in the same order on every pass`,
          { data: { key, recorded: recorded.name, requested: name } },
        ),
      );
    }
    if (recorded?.state === "done" || recorded?.state === "failed") {
      let value: unknown;
      try {
        value = decodeValue(recorded.value ?? "", label);
      } catch (error) {
        throw this.fail(error);
      }
      hooks.onReplay?.();
      if (recorded.state === "failed") throw value;
      return value as T;
    }
    // A start without an outcome means the last process died inside this step: this is a re-run.
    let attempt =
      recorded === undefined ? 1 : recorded.state === "started" ? recorded.attempt + 1 : recorded.attempt;
    const retry = stepOptions.retry ?? this.options.retry ?? { attempts: 1 };
    const attempts = attemptsOf(retry);
    let value: T;
    for (;;) {
      const tryAttempt = attempt;
      const started: JournalRecord = { key, name, state: "started", attempt, value: null };
      const idempotencyKey = `${this.options.runId}:${key}`;
      hooks.onStart?.({ key, attempt, idempotencyKey, signal: this.controller.signal });
      await this.write({ journal: [started] });
      this.options.journal.set(key, started);
      let tryInfo: StepInfo | undefined;
      try {
        value = await runTry(
          (signal) => {
            tryInfo = { key, attempt: tryAttempt, idempotencyKey, signal };
            const info = tryInfo;
            return scopes.run({ runtime: this, prefix: key, counter: 0, info }, () => fn(info));
          },
          this.controller.signal,
          stepOptions.timeoutMs,
          `Step "${name}" (${key}, attempt ${attempt})`,
        );
        break;
      } catch (error) {
        if (isInterrupt(error)) {
          // Not a crash: the step resumes as the same attempt.
          this.pendingJournal.push({ key, name, state: "interrupted", attempt, value: null });
          throw error;
        }
        if (attempt < attempts && !this.controller.signal.aborted && worthRetrying(retry, error)) {
          // This try is journaled with its error under its own attempt; the step's record stays
          // `started`, so a crash before the next try resumes at the next attempt number.
          const delayMs = delayBefore(retry, attempt);
          hooks.onRetry?.(
            error,
            tryInfo ?? { key, attempt, idempotencyKey, signal: this.controller.signal },
            delayMs,
          );
          await this.write({
            journal: [
              { key: `${key}@${attempt}`, name, state: "failed", attempt, value: encodeError(error, label) },
            ],
          });
          await pause(delayMs, this.controller.signal);
          attempt++;
          continue;
        }
        const failed: JournalRecord = {
          key,
          name,
          state: "failed",
          attempt,
          value: encodeError(error, label),
        };
        hooks.onError?.(decodeValue(failed.value ?? ""));
        await this.write({ journal: [failed] });
        this.options.journal.set(key, failed);
        throw error;
      }
    }
    let text: string;
    try {
      text = encodeValue(value, `the result ${label}`);
    } catch (refusal) {
      const failed: JournalRecord = {
        key,
        name,
        state: "failed",
        attempt,
        value: encodeError(refusal, label),
      };
      hooks.onError?.(refusal);
      await this.write({ journal: [failed] });
      this.options.journal.set(key, failed);
      throw refusal;
    }
    // The first pass returns what a replay would: the value as it comes back from the journal.
    const replayed = decodeValue(text, label) as T;
    hooks.onResult?.(replayed);
    // The outcome rides with the next commit: the next step's `started`, the node's transition, or a
    // flush on the next turn of the event loop, whichever comes first (ADR 0107). A crash before it lands
    // re-runs `fn` as the next attempt, as a crash inside `fn` would.
    const done: JournalRecord = { key, name, state: "done", attempt, value: text };
    this.pendingJournal.push(done);
    this.options.journal.set(key, done);
    this.scheduleFlush();
    return replayed;
  }
}

/** Longest frame type `emit` takes: a name, not a payload. */
const maxFrameTypeLength = 128;

/**
 * A frame's type is the SSE `event:` line of the frames stream: a line break would end it (the stream
 * refuses to write it, and every watcher stops at that frame), so `emit` refuses it up front.
 */
function checkFrameType(type: unknown): void {
  if (
    typeof type === "string" &&
    type.length > 0 &&
    type.length <= maxFrameTypeLength &&
    !/\p{Cc}/u.test(type)
  )
    return;
  throw new DurableError(
    "invalid_request",
    `A frame's type is a name of 1–${maxFrameTypeLength} characters without line breaks or control characters (got ${JSON.stringify(String(type).slice(0, 80))})`,
    { data: { type: String(type).slice(0, maxFrameTypeLength) } },
  );
}

function encodeError(error: unknown, label: string): string {
  try {
    return encodeValue(error instanceof Error ? error : new Error(String(error)), `the error ${label}`);
  } catch {
    // Unjournalable error data: keep what a reader needs, the class name, message and code.
    const plain = error as { name?: unknown; message?: unknown; code?: unknown };
    const copy = Object.assign(new Error(String(plain.message ?? error)), {
      ...(typeof plain.code === "string" ? { code: plain.code } : {}),
    });
    copy.name = typeof plain.name === "string" ? plain.name : "Error";
    return encodeValue(copy, `the error ${label}`);
  }
}
