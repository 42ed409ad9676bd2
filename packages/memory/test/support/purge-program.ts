/**
 * The purge property's programs (ADR 0559): random writes and purges over a few users, agents and
 * sessions, each write's marker word tracked by what the oracle expects of it.
 */
import assert from "node:assert/strict";
import { setImmediate } from "node:timers/promises";
import { MemoryError, type MemoryService, type MemoryStore } from "@tackle/memory";
import { checkJobs, consolidation, importJob, noveltyScan, type TrackedJob } from "./purge-jobs.ts";

const users = ["u0", "u1", "u2"];
const agents = ["a0", "a1"];
const sessions = ["s0", "s1"];
const words = "garden fence river piano violet copper lantern meadow harbor walnut falcon pepper orbit"
  .concat(" canyon ember glacier saffron timber velvet quartz marble tundra cobalt willow")
  .split(" ");

export type Scope = { userId?: string; agentId?: string; sessionId?: string };
export type Random = () => number;
const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const scopeKey = (scope: Scope) => JSON.stringify([scope.userId, scope.agentId, scope.sessionId]);
/** Whether a purge of `purged` deletes a record of `scope`: every field the purge names matches. */
export const covers = (purged: Scope, scope: Scope) =>
  (Object.keys(purged) as (keyof Scope)[]).every((field) => scope[field] === purged[field]);

/**
 * kept: must read back; gone: must be in no column; racing: a write racing a purge of its scope,
 * read after the race to be one or the other; loose: replaced by a later write (no claim).
 */
export type State = "kept" | "gone" | "racing" | "loose";

export interface Mark {
  readonly marker: string;
  readonly scope: Scope;
  readonly what: string;
  state: State;
  /** Whether the record reads back through the service, whole. */
  read(): Promise<boolean>;
}

/** A write of a program, to be told whether a purge running beside it covers its scope. */
export interface Write {
  readonly scope: Scope;
  run(racing: boolean): Promise<void>;
}

interface MemoryRecord {
  readonly id: string;
  readonly scope: Scope;
  readonly marks: Mark[];
  deleted: boolean;
}

/** Errors a write may answer when what it names was purged or changed under it. */
const expected = (error: unknown) =>
  MemoryError.isInstance(error) && ["not_found", "conflict"].includes(error.code);

export class Program {
  readonly marks: Mark[] = [];
  readonly memories = new Map<string, MemoryRecord>();
  readonly blocks = new Map<string, { scope: Scope; marks: Mark[] }>();
  /** Jobs the program made that no purge has deleted, with how each finished. */
  readonly jobs = new Map<string, TrackedJob>();
  readonly tally: Record<string, number> = {};
  private next = 0;

  readonly service: MemoryService;
  readonly store: MemoryStore;
  readonly tenant: string;
  readonly prefix: string;
  readonly random: Random;

  constructor(service: MemoryService, store: MemoryStore, tenant: string, prefix: string, random: Random) {
    this.service = service;
    this.store = store;
    this.tenant = tenant;
    this.prefix = prefix;
    this.random = random;
  }

  marker(): string {
    return `${this.prefix}${++this.next}q`;
  }

  text(marker: string): string {
    return [marker, ...Array.from({ length: 5 }, () => pick(this.random, words))].join(" ");
  }

  metadata(marker: string): { metadata?: Record<string, unknown> } {
    const roll = this.random();
    return roll < 0.4 ? {} : roll < 0.55 ? { metadata: {} } : { metadata: { note: marker, n: this.next } };
  }

  mark(marker: string, scope: Scope, what: string, racing: boolean, read: () => Promise<boolean>): Mark {
    const mark: Mark = { marker, scope, what, state: racing ? "racing" : "kept", read };
    this.marks.push(mark);
    return mark;
  }

  count(what: string) {
    this.tally[what] = (this.tally[what] ?? 0) + 1;
  }

  readsVersion(id: string, marker: string) {
    return async () => {
      try {
        const { versions } = await this.service.memoryHistory(this.tenant, id);
        return versions.some((version) => JSON.stringify(version).includes(marker));
      } catch (error) {
        if (MemoryError.isInstance(error) && error.code === "not_found") return false;
        throw error;
      }
    };
  }

  /** Runs one write; on an error it may answer, its marks are gone (a failed write stores nothing). */
  async attempt(what: string, marks: Mark[], write: () => Promise<void>, racing: boolean) {
    try {
      await write();
      this.count(what);
    } catch (error) {
      if (!(racing && expected(error)))
        throw new Error(`${what}: ${(error as Error).message}`, { cause: error });
      for (const mark of marks) mark.state = "gone";
      this.count(`${what} refused`);
    }
  }

  async add(scope: Scope, racing: boolean, keyed: boolean) {
    const marker = this.marker();
    const body = { ...scope, content: this.text(marker), ...this.metadata(marker) };
    const marks: Mark[] = [];
    const what = keyed ? "keyed add" : "add";
    await this.attempt(
      what,
      marks,
      async () => {
        const run = () => this.service.add(this.tenant, body);
        const key = `key-${marker}`;
        const { memory, created } = keyed
          ? (await this.service.writeOnce(this.tenant, { key, request: ["add", body], scope }, run)).answer
          : await run();
        if (!created) return; // a near duplicate of the scope: nothing stored, the marker nowhere
        const mark = this.mark(marker, scope, what, racing, this.readsVersion(memory.id, marker));
        marks.push(mark);
        this.memories.set(memory.id, { id: memory.id, scope, marks: [mark], deleted: false });
        if (keyed) {
          marks.push(
            this.mark(marker, scope, "kept answer", racing, async () => {
              const now = new Date().toISOString();
              const record = await this.store.findIdempotencyKey(this.tenant, key, now);
              return record?.answer?.includes(marker) ?? false;
            }),
          );
        }
      },
      racing,
    );
  }

  /** An update or a delete of a memory; `racing`: its scope is being purged meanwhile. */
  async change(memory: MemoryRecord, racing: boolean) {
    const marker = this.marker();
    const mark = this.mark(marker, memory.scope, "update", racing, this.readsVersion(memory.id, marker));
    const deleting = !memory.deleted && this.random() < 0.3;
    await this.attempt(
      deleting ? "delete" : "update",
      [mark],
      async () => {
        if (deleting) {
          await this.service.deleteMemory(this.tenant, memory.id, { reason: `forget ${marker}` });
          memory.deleted = true;
        } else if (memory.deleted) {
          // A deleted memory refuses an update: its marker is stored nowhere.
          await assert.rejects(
            this.service.updateMemory(this.tenant, memory.id, { content: this.text(marker) }),
          );
          mark.state = "gone";
        } else {
          const metadata = this.metadata(marker);
          const edit = this.random() < 0.25 ? { metadata: metadata.metadata ?? { note: marker } } : {};
          await this.service.updateMemory(this.tenant, memory.id, { content: this.text(marker), ...edit });
        }
      },
      racing,
    );
    memory.marks.push(mark);
  }

  async event(scope: Scope, racing: boolean) {
    const marker = this.marker();
    const marks: Mark[] = [];
    await this.attempt(
      "event",
      marks,
      async () => {
        const { event } = await this.service.writeEvent(this.tenant, {
          ...scope,
          role: pick(this.random, ["user", "assistant"] as const),
          content: this.text(marker),
          ...this.metadata(marker),
          infer: false,
        });
        marks.push(
          this.mark(marker, scope, "event", racing, async () => {
            const [stored] = await this.store.getEvents(this.tenant, [event.id]);
            return stored?.content.includes(marker) ?? false;
          }),
        );
      },
      racing,
    );
  }

  async document(scope: Scope, racing: boolean) {
    const marker = this.marker();
    const marks: Mark[] = [];
    await this.attempt(
      "document",
      marks,
      async () => {
        const { document } = await this.service.ingestDocument(this.tenant, {
          ...scope,
          title: `${marker} notes`,
          content: `${this.text(marker)}. ${this.text(marker)}.`,
          ...this.metadata(marker),
        });
        marks.push(
          this.mark(marker, scope, "document", racing, async () => {
            const stored = await this.store.getDocument(this.tenant, document.id);
            if (!stored) return false;
            const { results } = await this.service.searchKnowledge(this.tenant, { ...scope, query: marker });
            return results.some((result) => JSON.stringify(result).includes(marker));
          }),
        );
      },
      racing,
    );
  }

  async selfEdit(scope: Scope, racing: boolean) {
    const marker = this.marker();
    const key = scopeKey(scope);
    const block = this.blocks.get(key) ?? { scope, marks: [] };
    this.blocks.set(key, block);
    const rewrite = this.random() < 0.15;
    const mark = this.mark(marker, scope, "core block", racing, async () => {
      const { blocks } = await this.service.selfEdit(this.tenant, { ...scope, edits: [] });
      return blocks.some((stored) => stored.label === "human" && stored.value.includes(marker));
    });
    await this.attempt(
      "core block",
      [mark],
      async () => {
        await this.service.selfEdit(this.tenant, {
          ...scope,
          edits: [{ op: rewrite ? "rewrite" : "append", label: "human", text: `Goes by ${marker}.` }],
        });
      },
      racing,
    );
    if (rewrite && mark.state !== "gone") {
      for (const earlier of block.marks) if (earlier.state === "kept") earlier.state = "loose";
    }
    block.marks.push(mark);
  }

  async search(scope: Scope, racing: boolean) {
    const marker = this.marker();
    const marks: Mark[] = [];
    await this.attempt(
      "search",
      marks,
      async () => {
        const { traceId } = await this.service.search(this.tenant, { ...scope, query: this.text(marker) });
        marks.push(
          this.mark(marker, scope, "trace", racing, async () => {
            try {
              return (await this.service.getTrace(this.tenant, traceId)).trace.query.includes(marker);
            } catch (error) {
              if (MemoryError.isInstance(error) && error.code === "not_found") return false;
              throw error;
            }
          }),
        );
      },
      racing,
    );
  }

  /** A purge and, beside it, `writes` (each told whether the purge covers its scope). */
  async purge(purged: Scope, writes: readonly Write[]) {
    const before = this.marks.filter(
      (mark) => (mark.state === "kept" || mark.state === "loose") && covers(purged, mark.scope),
    );
    const memoriesBefore = [...this.memories.values()].filter((memory) => covers(purged, memory.scope));
    const blocksBefore = [...this.blocks.entries()].filter(([, block]) => covers(purged, block.scope));
    const jobsBefore = new Set(this.jobs.keys());
    // The purge starts after a few turns of the event loop: writes land before it, during it, after it.
    const turns = Math.floor(this.random() * 4);
    const purge = async () => {
      for (let turn = 0; turn < turns; turn += 1) await setImmediate();
      return this.service.purge(this.tenant, purged);
    };
    const outcomes = await Promise.allSettled([
      purge(),
      ...writes.map(({ scope, run }) => run(covers(purged, scope))),
    ]);
    for (const outcome of outcomes) if (outcome.status === "rejected") throw outcome.reason;
    this.count(writes.length > 0 ? "purge with writes" : "purge");
    for (const mark of before) mark.state = "gone";
    for (const memory of memoriesBefore) this.memories.delete(memory.id);
    for (const [key, block] of blocksBefore) {
      block.marks = block.marks.filter((mark) => mark.state === "racing");
      if (block.marks.length === 0) this.blocks.delete(key);
    }
    // What raced the purge is one or the other, whole: read back, or (checked by the scan) nowhere.
    const racing = this.marks.filter((mark) => mark.state === "racing");
    const reads = new Map<Mark, boolean>();
    for (const mark of racing) reads.set(mark, await mark.read());
    for (const mark of racing) {
      mark.state = reads.get(mark) ? "kept" : "gone";
      this.count(`raced, ${mark.state}`);
      // A keyed add's memory and its kept answer stay or go together.
      const twin = racing.find((other) => other !== mark && other.marker === mark.marker);
      if (twin)
        assert.equal(reads.get(mark), reads.get(twin), `${mark.marker}: ${mark.what} without ${twin.what}`);
    }
    for (const memory of this.memories.values()) {
      if (memory.marks[0]?.state === "gone") this.memories.delete(memory.id);
    }
    for (const [key, block] of this.blocks) {
      block.marks = block.marks.filter((mark) => mark.state !== "gone");
      if (block.marks.length === 0) this.blocks.delete(key);
    }
    await checkJobs(this, purged, jobsBefore);
  }
}

export function randomScope(random: Random): Scope {
  return {
    userId: pick(random, users),
    ...(random() < 0.4 ? { agentId: pick(random, agents) } : {}),
    ...(random() < 0.5 ? { sessionId: pick(random, sessions) } : {}),
  };
}

export function randomPurge(random: Random): Scope {
  const roll = random();
  const userId = pick(random, users);
  if (roll < 0.4) return { userId };
  if (roll < 0.6) return { userId, sessionId: pick(random, sessions) };
  if (roll < 0.75) return { userId, agentId: pick(random, agents) };
  if (roll < 0.88) return { agentId: pick(random, agents) };
  return { sessionId: pick(random, sessions) };
}

/** A scope `purged` covers: its fields, and random ones for those it leaves open. */
export function scopeWithin(random: Random, purged: Scope): Scope {
  const scope = { ...randomScope(random), ...purged };
  return scope.userId ? scope : { ...scope, userId: pick(random, users) };
}

/**
 * One write to `scope` (or a change to a memory `within` covers), chosen at random, with the scope of
 * the record it writes: a purge beside it races it when it covers that scope.
 */
export function randomWrite(program: Program, scope: Scope, within: Scope, taken = new Set<string>()): Write {
  const { random } = program;
  const roll = random();
  const inScope = [...program.memories.values()].filter(
    (memory) => covers(within, memory.scope) && !taken.has(memory.id),
  );
  const write = (run: (racing: boolean) => Promise<void>): Write => ({ scope, run });
  if (roll < 0.22) return write((racing) => program.add(scope, racing, false));
  if (roll < 0.32) return write((racing) => program.add(scope, racing, true));
  if (roll < 0.5 && inScope.length > 0) {
    const memory = pick(random, inScope);
    taken.add(memory.id);
    return { scope: memory.scope, run: (racing) => program.change(memory, racing) };
  }
  if (roll < 0.64) return write((racing) => program.event(scope, racing));
  if (roll < 0.74) return write((racing) => program.document(scope, racing));
  if (roll < 0.88) return write((racing) => program.selfEdit(scope, racing));
  if (roll < 0.91) return write((racing) => program.search(scope, racing));
  if (roll < 0.94) return write((racing) => importJob(program, scope, racing));
  if (roll < 0.98) return write((racing) => consolidation(program, scope, racing));
  return write((racing) => noveltyScan(program, scope, racing));
}
