/**
 * One round of the concurrent-drivers property: a random program driven on one thread by 2–4 runners
 * over one store, each runner a separate process's view of it (`racing-store.ts`), through batches of
 * operations sent at once — the same start twice or thrice, the same answers two or three times, now
 * and then conflicting answers from another runner, bare resumes that take a frozen driver's run over,
 * reads — until the run ends. Every operation's outcome is kept and judged against what the store
 * recorded; the round's end is judged against the same program driven alone.
 */
import { setTimeout as sleep, setImmediate as turn } from "node:timers/promises";
import type { Logger } from "@tackle/core";
import {
  type Answers,
  createRunner,
  DurableError,
  type DurableStore,
  decodeValue,
  type Graph,
  type Runner,
  type RunSnapshot,
} from "@tackle/durable";
import { seededRandom, underLoadMs } from "@tackle/test-support";
import {
  answerFor,
  graphOf,
  initialState,
  Oracle,
  type Program,
  randomProgram,
  type State,
} from "./property-programs.ts";
import {
  allowedCodes,
  describeError,
  isDeepEqual,
  type Kind,
  otherAnswer,
  type Sent,
  type Totals,
  withDeadline,
} from "./racing-outcomes.ts";
import { type RacingStore, racingStore, trace } from "./racing-store.ts";

/** The lease of every runner: short, so a frozen driver is taken over within the round. */
export const leaseMs = 40;

export interface RoundOptions {
  /** Runners with the recovery sweep on, and a first driver frozen until a sweep takes its run over. */
  readonly sweep?: boolean;
}

export class RacingRound {
  readonly random: () => number;
  readonly program: Program;
  readonly oracle = new Oracle({ takenOver: true });
  readonly graph: Graph<State>;
  readonly threadId: string;
  readonly runIds: readonly string[];
  readonly racing: RacingStore[];
  readonly runners: Runner[];
  /** The answers that won, by interrupt id: the reference is driven with them. */
  readonly winners = new Map<string, unknown>();
  readonly violations: string[] = [];
  /** Takeovers by this round's sweeps. */
  private sweepTakeovers = 0;
  private pending: Promise<unknown>[] = [];
  private readonly sent: Sent[] = [];

  readonly seed: number;
  readonly base: DurableStore;
  readonly totals: Totals;
  readonly options: RoundOptions;

  constructor(
    seed: number,
    stores: readonly DurableStore[],
    base: DurableStore,
    totals: Totals,
    options: RoundOptions = {},
  ) {
    this.seed = seed;
    this.base = base;
    this.totals = totals;
    this.options = options;
    this.random = seededRandom(seed);
    this.program = randomProgram(this.random);
    const name = `${options.sweep === true ? "s" : "c"}-${seed}`;
    this.graph = graphOf(this.program, name, () => this.oracle);
    this.threadId = name;
    this.runIds = [`r1-${seed}`, ...(this.random() < 0.3 ? [`r2-${seed}`] : [])];
    // A sweep round has two runners or more besides the frozen one, so their sweeps can race.
    const count =
      (options.sweep === true ? 3 : 2) + Math.floor(this.random() * (options.sweep === true ? 2 : 3));
    this.racing = Array.from({ length: count }, (_, index) =>
      racingStore(
        `R${index}`,
        stores[index % stores.length] as DurableStore,
        this.oracle,
        seededRandom(seed * 8 + index),
        totals,
      ),
    );
    this.runners = this.racing.map(({ store }, index) =>
      createRunner({
        store,
        graphs: [this.graph],
        leaseMs,
        recover: options.sweep === true ? { everyMs: 1000 } : false,
        maxTakeovers: 1_000,
        logger: this.logger(index),
      }),
    );
  }

  /** What a runner logs: sweep takeovers counted; a failure, or a sweep that could not work, a defect. */
  private logger(index: number): Logger {
    const ignore = () => {};
    return {
      debug: ignore,
      info: ignore,
      warn: (message, fields) => {
        if (message === "durable run recovered by the sweep") {
          this.sweepTakeovers += 1;
          this.totals.sweepTakeovers += 1;
        } else if (message !== "durable run taken over by another runner")
          this.violations.push(`runner ${index} warned "${message}" ${JSON.stringify(fields)}`);
      },
      error: (message, fields) =>
        this.violations.push(`runner ${index} logged "${message}" ${JSON.stringify(fields)}`),
    };
  }

  pick(except?: number): number {
    const choices = this.runners.map((_, index) => index).filter((index) => index !== except);
    return choices[Math.floor(this.random() * choices.length)] as number;
  }

  pickOf(senders: readonly number[]): number {
    return senders[Math.floor(this.random() * senders.length)] as number;
  }

  /**
   * Sends an operation after `delayMs`, or a random short delay (none, a few event-loop turns, a
   * millisecond or two); settles when the operation does.
   */
  send(
    kind: Kind,
    runner: number,
    call: (runner: Runner) => Promise<unknown>,
    options: { readonly answers?: Sent["answers"]; readonly delayMs?: number } = {},
  ): Promise<void> {
    const { answers, delayMs } = options;
    const sent: Sent = { kind, runner, ...(answers === undefined ? {} : { answers }) };
    this.sent.push(sent);
    const pick = this.random();
    const turns =
      delayMs !== undefined || pick < 0.4 ? 0 : pick < 0.8 ? 1 + Math.floor(this.random() * 3) : -1;
    const ms = delayMs ?? Math.floor(this.random() * 3);
    const settled = (async () => {
      if (turns < 0 || delayMs !== undefined) await sleep(ms);
      for (let index = 0; index < turns; index += 1) await turn();
      trace(`R${runner} sends ${kind} ${answers ?? ""}`);
      try {
        sent.outcome = { ok: true, value: await call(this.runners[runner] as Runner) };
      } catch (error) {
        sent.outcome = { ok: false, error };
      }
      const told = sent.outcome.ok
        ? (sent.outcome.value as RunSnapshot | undefined)?.status
        : describeError(sent.outcome.error);
      trace(`R${runner} ${kind} ${answers ?? ""} answered ${told}`);
    })();
    this.pending.push(settled);
    return settled;
  }

  /** Now and then a read from some runner while the batch runs. */
  private reads(): void {
    for (let count = Math.floor(this.random() * 3); count > 0; count -= 1) {
      this.totals.gets += 1;
      this.send("get", this.pick(), (runner) => runner.get(this.threadId));
    }
  }

  /**
   * Now and then one of the batch's senders freezes at one of its next store calls, for two to four
   * leases; 1–3 other runners send bare resumes meanwhile, some before the lease is out, some after.
   * It thaws when they have been answered, or at the end of its time.
   */
  private maybeFreeze(sender: number, chance = 0.25, atCall?: number): void {
    if (this.random() >= chance) return;
    const ms = Math.round(leaseMs * (2 + this.random() * 2));
    const takers = Array.from({ length: 1 + Math.floor(this.random() * 3) }, () => ({
      runner: this.pick(sender),
      afterMs: Math.round(leaseMs * 0.25 + this.random() * (ms - leaseMs * 0.25)),
    }));
    const frozen = this.racing[sender] as RacingStore;
    frozen.freezeAt(atCall ?? 1 + Math.floor(this.random() * 8), ms, () => {
      this.totals.freezes += 1;
      const tried = takers.map(({ runner, afterMs }) => this.takeover(runner, afterMs));
      this.pending.push(Promise.all(tried).then(() => frozen.thaw()));
    });
  }

  /** A bare resume: takes the run over if its driver has been silent for the lease. */
  private takeover(runner: number, delayMs?: number): Promise<void> {
    this.totals.takeoverTries += 1;
    return this.send("takeover", runner, (driver) => driver.resume(this.threadId), {
      ...(delayMs === undefined ? {} : { delayMs }),
    });
  }

  /** Waits for every operation of the batch (and those it set off), then for every runner to be idle. */
  async settle(label: string): Promise<Sent[]> {
    const deadline = underLoadMs(20_000);
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0);
      await withDeadline(
        Promise.all(batch),
        deadline,
        `seed ${this.seed}: ${label} never settled (a deadlock?)`,
      );
    }
    for (const racing of this.racing) racing.thaw();
    await withDeadline(
      Promise.all(this.runners.map((runner) => runner.idle())),
      deadline,
      `seed ${this.seed}: a runner never went idle after ${label}`,
    );
    const sent = this.sent.splice(0);
    for (const operation of sent) this.judgeCode(operation, label);
    return sent;
  }

  /** Every rejection is a DurableError with a code its operation may be told; a read answers this thread. */
  private judgeCode(operation: Sent, label: string): void {
    const { outcome } = operation;
    if (outcome?.ok === true && operation.kind === "get" && outcome.value !== undefined) {
      const { runId } = outcome.value as RunSnapshot;
      if (!this.runIds.includes(runId)) this.violations.push(`${label}: a get answered a run ${runId}`);
    }
    if (outcome === undefined || outcome.ok) return;
    const { error } = outcome;
    if (!DurableError.isInstance(error)) {
      this.violations.push(`${label}: a ${operation.kind} threw an untyped error: ${String(error)}`);
      return;
    }
    if (error.code === "run_active") this.totals.refusedActive += 1;
    // A resume's refusal is judged against the answers stored (`judgeAnswers`).
    const allowed = operation.kind === "resume" ? ["answer_conflict"] : allowedCodes[operation.kind];
    if (!allowed.includes(error.code))
      this.violations.push(`${label}: a ${operation.kind} was told ${error.code}: ${error.message}`);
  }

  /** The thread as one runner reads it between batches. */
  async read(): Promise<RunSnapshot<State> | undefined> {
    this.totals.gets += 1;
    return (this.runners[this.pick()] as Runner).get<State>(this.threadId);
  }

  /** The same start (thread and run id) sent one to three times at once, from random runners. */
  async start(runId: string): Promise<void> {
    if (runId !== this.runIds[0]) this.totals.followUpRuns += 1;
    if (this.options.sweep === true && runId === this.runIds[0]) return this.startFrozen(this.pick(), runId);
    const copies = this.random() < 0.8 ? 2 + Math.floor(this.random() * 2) : 1;
    if (copies > 1) this.totals.startsRaced += 1;
    const senders = Array.from({ length: copies }, () => this.pick());
    // Often one copy is slow between its read of the thread and its write (a first run's create, its
    // second call; a next run's claim, its third), so the other's run is well on — or over — by then.
    if (copies > 1) this.maybeFreeze(this.pickOf(senders), 0.4, runId === this.runIds[0] ? 2 : 3);
    else this.maybeFreeze(this.pickOf(senders));
    for (const sender of senders) {
      this.totals.starts += 1;
      this.send("start", sender, (runner) =>
        runner.start(this.graph, initialState(), { threadId: this.threadId, runId }),
      );
    }
    // Now and then a bare resume while a runner drives the run: refused, or answered with the run.
    if (this.random() < 0.25) this.takeover(this.pick(), Math.floor(this.random() * 8));
    this.reads();
    for (const operation of await this.settle(`the start of ${runId}`)) {
      if (operation.kind !== "start" || operation.outcome?.ok !== true) continue;
      const snapshot = operation.outcome.value as RunSnapshot<State>;
      if (snapshot.runId !== runId)
        this.violations.push(`a start of ${runId} answered the run ${snapshot.runId} (${snapshot.status})`);
    }
  }

  /**
   * A sweep round's start: one runner starts the run and freezes once it owns it, until another
   * runner's recovery sweep takes it over; the sweeps' first looks that find it wait for each other,
   * so two or more sweeps race for it as two replicas would.
   */
  private async startFrozen(first: number, runId: string): Promise<void> {
    const zombie = this.racing[first] as RacingStore;
    const others = this.racing.filter((racing) => racing !== zombie);
    const looked = new Set<RacingStore>();
    let allLooked!: () => void;
    const together = new Promise<void>((resolve) => {
      allLooked = resolve;
    });
    for (const racing of others) {
      racing.onStaleLook = async (found) => {
        if (!found.includes(this.threadId) || looked.has(racing)) return;
        looked.add(racing);
        if (looked.size === others.length) allLooked();
        await Promise.race([together, sleep(700)]);
      };
    }
    // getRun, createRun, then the drive's read of the journal or its first commit: frozen once the run
    // is its own, before it pauses or ends.
    zombie.freezeAt(3 + Math.floor(this.random() * 2), 2_500, () => {
      this.totals.freezes += 1;
    });
    this.totals.starts += 1;
    this.send("start", first, (runner) =>
      runner.start(this.graph, initialState(), { threadId: this.threadId, runId }),
    );
    const watch = (async () => {
      const until = Date.now() + 3_000;
      while (this.sweepTakeovers === 0 && Date.now() < until) await sleep(10);
      await sleep(20);
      zombie.thaw();
    })();
    await this.settle(`the frozen start of ${runId}`);
    await watch;
    for (const racing of others) racing.onStaleLook = undefined;
    if (looked.size >= 2) this.totals.sweepsRaced += 1;
  }

  /**
   * The answers to the open interrupts sent one to three times at once; in some batches another
   * runner sends different answers (to one or all of them) at the same moment, one or two times.
   */
  async resume(snapshot: RunSnapshot<State>): Promise<void> {
    const open = snapshot.interrupts;
    const first: Answers = Object.fromEntries(
      open.map((entry) => [entry.id, answerFor(entry.id, entry.request)]),
    );
    const differing = this.random() < 0.5 ? open : open.filter(() => this.random() < 0.5);
    const second: Answers | undefined =
      this.random() < 0.45 && differing.length > 0
        ? {
            ...first,
            ...Object.fromEntries(
              differing.map((entry) => [entry.id, otherAnswer(entry.id, first[entry.id])]),
            ),
          }
        : undefined;
    const copies = this.random() < 0.75 ? 2 + Math.floor(this.random() * 2) : 1;
    const rivals = second === undefined ? 0 : 1 + Math.floor(this.random() * 2);
    if (copies > 1) this.totals.resumesRepeated += 1;
    if (rivals > 0) this.totals.conflictsRaced += 1;
    const senders = Array.from({ length: copies + rivals }, () => this.pick());
    this.maybeFreeze(this.pickOf(senders));
    const order = senders.map((runner, index) => ({
      runner,
      set: index < copies ? ("first" as const) : ("second" as const),
    }));
    // The rivals are sent first as often as not.
    if (this.random() < 0.5) order.reverse();
    for (const { runner, set } of order) {
      this.totals.resumes += 1;
      const answers = set === "first" ? first : (second as Answers);
      this.send("resume", runner, (driver) => driver.resume(this.threadId, answers), { answers: set });
    }
    // Now and then a bare resume while a runner drives the run: refused, or answered with the run.
    if (this.random() < 0.25) this.takeover(this.pick(), Math.floor(this.random() * 8));
    this.reads();
    const sent = await this.settle(`the answers to ${open.map((entry) => entry.id).join(", ")}`);
    await this.judgeAnswers(
      open.map((entry) => entry.id),
      first,
      second,
      sent,
    );
  }

  /**
   * Exactly one answer set is stored, whole; every resume that carried it was answered with the run,
   * every one that carried the other was told `answer_conflict` naming an interrupt answered otherwise.
   */
  private async judgeAnswers(
    ids: readonly string[],
    first: Answers,
    second: Answers | undefined,
    sent: Sent[],
  ) {
    const stored = new Map<string, unknown>();
    for (const record of await this.base.readJournal(this.threadId)) {
      if (record.key.startsWith("answer:")) stored.set(record.key.slice(7), decodeValue(record.value ?? ""));
    }
    const holds = (answers: Answers) =>
      ids.every((id) => stored.has(id) && isDeepEqual(stored.get(id), answers[id]));
    const won = holds(first) ? "first" : second !== undefined && holds(second) ? "second" : undefined;
    if (won === undefined) {
      const found = Object.fromEntries(ids.map((id) => [id, stored.get(id)]));
      this.violations.push(
        `the stored answers are neither set whole: ${JSON.stringify({ found, first, second })}`,
      );
      return;
    }
    if (won === "second") this.totals.conflictsWonBySecond += 1;
    for (const id of ids) this.winners.set(id, stored.get(id));
    for (const operation of sent) {
      if (operation.kind !== "resume" || operation.outcome === undefined) continue;
      const { outcome } = operation;
      if (operation.answers === won) {
        if (!outcome.ok)
          this.violations.push(`a resume with the answers that won was told ${describeError(outcome.error)}`);
        continue;
      }
      const lost = operation.answers === "first" ? first : (second as Answers);
      const refusal = outcome.ok ? undefined : outcome.error;
      const id = DurableError.isInstance(refusal)
        ? (refusal.data as { id?: unknown } | undefined)?.id
        : undefined;
      const told = outcome.ok
        ? `the run (${(outcome.value as RunSnapshot).status})`
        : describeError(outcome.error);
      const conflict =
        !outcome.ok && DurableError.isInstance(outcome.error) && outcome.error.code === "answer_conflict";
      if (!conflict || typeof id !== "string" || isDeepEqual(stored.get(id), lost[id])) {
        this.violations.push(`a resume with the answers that lost was told ${told}`);
      } else this.totals.conflictLosers += 1;
    }
  }

  /** A run found running between batches (no runner drives it): bare resumes once the lease is out. */
  async recover(): Promise<void> {
    await sleep(leaseMs);
    for (let count = 1 + Math.floor(this.random() * 2); count > 0; count -= 1) this.takeover(this.pick());
    await this.settle("a takeover of a silent run");
  }

  async close(): Promise<void> {
    for (const racing of this.racing) racing.thaw();
    await Promise.all(this.runners.map((runner) => runner.close()));
  }
}
