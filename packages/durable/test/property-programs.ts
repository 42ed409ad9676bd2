/**
 * What the durable properties share (`exactly-once.property.test.ts`, `concurrent-drivers.property.test.ts`):
 * random programs (chains of nodes, a loop back, journaled steps that fail and retry, tool calls,
 * approvals, interrupts) as graphs whose side effects an oracle sees, the oracle itself, the answers a
 * person gives, and the same program driven alone by one runner as the reference.
 */
import assert from "node:assert/strict";
import {
  approve,
  createGraph,
  createMemoryStore,
  createRunner,
  END,
  type Graph,
  type JournalRecord,
  type NodeContext,
  type RunSnapshot,
  tool,
} from "@tackle/durable";
import { applyToolCards } from "./helpers.ts";

export type Op =
  | { readonly kind: "step"; readonly failures: number }
  | { readonly kind: "tool" }
  | { readonly kind: "approve" }
  | { readonly kind: "interrupt" };

export interface Program {
  readonly nodes: readonly (readonly Op[])[];
  /** How many times the last node sends the run back to the first. */
  readonly loops: number;
}

export function randomProgram(random: () => number): Program {
  const nodes = Array.from({ length: 1 + Math.floor(random() * 3) }, () =>
    Array.from({ length: 1 + Math.floor(random() * 4) }, (): Op => {
      const pick = random();
      if (pick < 0.45) return { kind: "step", failures: random() < 0.25 ? 1 + Math.floor(random() * 2) : 0 };
      if (pick < 0.75) return { kind: "tool" };
      if (pick < 0.88) return { kind: "approve" };
      return { kind: "interrupt" };
    }),
  );
  return { nodes, loops: random() < 0.3 ? 1 : 0 };
}

/** One side effect, as the oracle saw it happen. */
export interface Effect {
  readonly key: string;
  readonly attempt: number;
  readonly idempotencyKey: string;
}

/** What the oracle knows: the journal records that landed, and the effects that ran. */
export class Oracle {
  readonly started = new Set<string>();
  readonly done = new Set<string>();
  readonly effects: Effect[] = [];
  readonly idempotencyKeys = new Map<string, string>();
  readonly violations: string[] = [];
  /** The last attempt of each step whose `started` record landed. */
  readonly lastStarted = new Map<string, number>();
  /** Effects of a driver whose run was taken over (with `takenOver`): a later attempt had begun. */
  overtaken = 0;
  private readonly takenOver: boolean;

  /**
   * `takenOver`: live drivers may be frozen and taken over (ADR 0102). A frozen driver that wakes may
   * still run the step it was at — it cannot know it was fenced out until its next write — so an effect
   * after the step's `done` is allowed when a later attempt of the step had started: the takeover's.
   */
  constructor(options: { readonly takenOver?: boolean } = {}) {
    this.takenOver = options.takenOver === true;
  }

  landed(journal: readonly JournalRecord[] | undefined): void {
    for (const record of journal ?? []) {
      if (record.state === "started") {
        this.started.add(`${record.key}#${record.attempt}`);
        this.lastStarted.set(record.key, Math.max(record.attempt, this.lastStarted.get(record.key) ?? 0));
      }
      if (record.state === "done") this.done.add(record.key);
    }
  }

  /** Reports what a store call that succeeded wrote: `method` called with `args`, answering `result`. */
  storeCallLanded(method: string, args: readonly unknown[], result: unknown): void {
    if (method === "createRun") this.landed((args[1] as { journal?: JournalRecord[] } | undefined)?.journal);
    if (method === "commit") this.landed((args[2] as { journal?: JournalRecord[] }).journal);
    if (method === "claimRun" && result !== undefined) {
      this.landed((args[3] as { journal?: JournalRecord[] } | undefined)?.journal);
    }
  }

  effect(key: string, attempt: number, idempotencyKey: string): void {
    if (!this.started.has(`${key}#${attempt}`)) {
      this.violations.push(`${key} attempt ${attempt} ran before its started record landed`);
    }
    const overtaken = this.takenOver && (this.lastStarted.get(key) ?? 0) > attempt;
    if (overtaken) this.overtaken += 1;
    else if (this.done.has(key)) this.violations.push(`${key} ran again after its done record landed`);
    if (this.effects.some((effect) => effect.key === key && effect.attempt === attempt)) {
      this.violations.push(`${key} attempt ${attempt} ran twice`);
    }
    const known = this.idempotencyKeys.get(key);
    if (known !== undefined && known !== idempotencyKey) {
      this.violations.push(`${key} attempt ${attempt} has idempotency key ${idempotencyKey}, not ${known}`);
    }
    this.idempotencyKeys.set(key, idempotencyKey);
    this.effects.push({ key, attempt, idempotencyKey });
  }

  /** How many times each step's function ran, by key. */
  runsByKey(): Map<string, number> {
    const runs = new Map<string, number>();
    for (const effect of this.effects) runs.set(effect.key, (runs.get(effect.key) ?? 0) + 1);
    return runs;
  }
}

export type State = { log: readonly string[]; loops: number };

/** The state every run of a program starts from. */
export const initialState = (): State => ({ log: [], loops: 0 });

/**
 * The program as a graph; its effects reported to `oracle` (a reference that checks nothing passes none).
 * `beforeEffect`, when given, is awaited inside each step and tool before its side effect: a slow tool.
 */
export function graphOf(
  program: Program,
  name: string,
  oracle: () => Oracle | undefined,
  beforeEffect?: () => Promise<void>,
): Graph<State> {
  const graph = createGraph<State>(name);
  for (const [index, ops] of program.nodes.entries()) {
    graph.node(`n${index}`, async (state, ctx) => {
      const log = [...state.log];
      for (const [position, op] of ops.entries())
        log.push(await runOp(ctx, op, `${position}`, oracle(), beforeEffect));
      const last = index === program.nodes.length - 1;
      return { log, loops: last ? state.loops + 1 : state.loops };
    });
    if (index > 0) graph.edge(`n${index - 1}`, `n${index}`);
  }
  graph.branch(`n${program.nodes.length - 1}`, (state) => (state.loops <= program.loops ? "n0" : END));
  return graph;
}

async function runOp(
  ctx: NodeContext,
  op: Op,
  position: string,
  oracle: Oracle | undefined,
  beforeEffect: (() => Promise<void>) | undefined,
): Promise<string> {
  const where = `${ctx.node}.${ctx.visit}.${position}`;
  type Info = { key: string; attempt: number; idempotencyKey: string };
  const effectNow = (info: Info) => {
    oracle?.effect(info.key, info.attempt, info.idempotencyKey);
    return `${where}:ran`;
  };
  const sideEffect =
    beforeEffect === undefined
      ? effectNow
      : async (info: Info) => {
          await beforeEffect();
          return effectNow(info);
        };
  switch (op.kind) {
    case "step":
      return ctx.step(
        `step-${position}`,
        async (info) => {
          const value = await sideEffect(info);
          // Fails its first tries (counted by attempt, so a crash-window re-run counts as one).
          if (info.attempt <= op.failures) throw new Error(`${where} failed try ${info.attempt}`);
          return value;
        },
        { retry: { attempts: op.failures + 1, backoff: () => 0 } },
      );
    case "tool":
      return tool(ctx, `tool-${position}`, { where }, sideEffect);
    case "approve": {
      const answer = await approve(ctx, { title: `approve ${where}`, toolName: "pay", params: { where } });
      if (!answer.approved) return `${where}:declined`;
      return tool(ctx, "pay", { where }, sideEffect);
    }
    case "interrupt":
      return `${where}:${String(await ctx.interrupt({ ask: where }))}`;
  }
}

/** The answer a person gives an open interrupt: the same for the same id, whatever the pass. */
export function answerFor(id: string, request: unknown): unknown {
  const approval = (request as { kind?: string } | undefined)?.kind === "approval";
  const even = [...id].reduce((sum, character) => sum + character.charCodeAt(0), 0) % 2 === 0;
  return approval ? { approved: even, ...(even ? {} : { reason: "no" }) } : `answer-${id}`;
}

export interface AloneOptions {
  /** The answer given each open interrupt (default `answerFor`). */
  readonly answer?: (id: string, request: unknown) => unknown;
  /** Sees the reference's side effects (it checks nothing: the reference is not under test). */
  readonly oracle?: Oracle;
  /** The run ids of the thread's runs, one after another (default one run of a random id). */
  readonly runIds?: readonly string[];
}

/** The same program driven alone by one runner, answering every interrupt with `options.answer`. */
export async function driveAlone(program: Program, seed: number, options: AloneOptions = {}) {
  const { answer = answerFor, oracle, runIds = [undefined] } = options;
  const store = createMemoryStore();
  const graph = graphOf(program, `p-${seed}`, () => oracle);
  const runner = createRunner({ store, graphs: [graph], leaseMs: 0, recover: false });
  const threadId = `t-${seed}`;
  let snapshot: RunSnapshot<State> | undefined;
  for (const runId of runIds) {
    let current = await runner.start(graph, initialState(), {
      threadId,
      ...(runId === undefined ? {} : { runId }),
    });
    while (current.status === "paused") {
      const open = current.interrupts;
      const answers = Object.fromEntries(open.map((entry) => [entry.id, answer(entry.id, entry.request)]));
      current = await runner.resume<State>(threadId, answers);
    }
    snapshot = current;
    assert.equal(snapshot.status, "completed", `seed ${seed}: the reference run ended ${snapshot.status}`);
  }
  const frames = await store.readFrames(threadId, 0);
  await runner.close();
  return { snapshot: snapshot as RunSnapshot<State>, frames };
}

/** The status of each tool card a UI would show, by tool-call id. */
export const cardStatuses = (frames: Parameters<typeof applyToolCards>[0]) =>
  Object.fromEntries([...applyToolCards(frames)].map(([id, card]) => [id, card.status]));

/** `TACKLE_PROPERTY_ROUNDS`, or the default. */
export const rounds = (fallback: number) => Number(process.env.TACKLE_PROPERTY_ROUNDS ?? fallback);

/** `count` seeds from `offset`, or the one `TACKLE_PROPERTY_SEED` names. */
export const seeds = (count: number, offset: number) =>
  process.env.TACKLE_PROPERTY_SEED === undefined
    ? Array.from({ length: count }, (_, index) => offset + index)
    : [Number(process.env.TACKLE_PROPERTY_SEED)];
