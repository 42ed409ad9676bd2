/**
 * The results ledger's takeover with recovery (ADR 0213), in process and fast: thousands of random
 * interleavings of calls under one key from three node slots, whose nodes are SIGKILLed at random
 * points — before their claim lands, while the tool runs, between the tool's effect and its `done`
 * record, while that record is written — and restarted, against an oracle. A killed node stops dead:
 * every promise it awaits never settles, and its alive subject is gone. The store is an in-memory
 * compare-and-set KV that loses a write now and then (a broker outage, tried again).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { createToolSet, defineTool, silentLogger, type ToolSet, type ToolTakeover } from "@tackle/core";
import { z } from "zod";
import { keyedRun } from "./keyed-call.ts";
import { createKeyedOnce, type KeyedOutcome, type LedgerEntry, type LedgerStore } from "./keyed-once.ts";

type Random = () => number;

/** The test's tools: an effect with recovery, the same without, a read. */
type ToolName = "apply" | "blind" | "lookup";

function seeded(seed: number): Random {
  let state = seed;
  return () => {
    state = (state * 16_807) % 2_147_483_647;
    return state / 2_147_483_647;
  };
}

const never = new Promise<never>(() => {});

/** A few turns of the event loop, a random number of them: where another node may act, or this one die. */
async function hop(random: Random): Promise<void> {
  const turns = Math.floor(random() * 4);
  for (let turn = 0; turn < turns; turn++)
    await new Promise((resolve) =>
      random() < 0.5 ? setImmediate(resolve) : queueMicrotask(() => resolve(0)),
    );
}

/** The bucket: compare-and-set creates, updates and deletes, as JetStream KV does them. */
class MemoryKv {
  readonly entries = new Map<string, LedgerEntry>();
  #sequence = 0;
  create(id: string, value: string): number {
    if (this.entries.get(id)?.operation === "PUT") throw new Error("wrong last sequence: key exists");
    return this.#put(id, "PUT", value);
  }
  update(id: string, value: string, revision: number): number {
    if (this.entries.get(id)?.revision !== revision) throw new Error("wrong last sequence");
    return this.#put(id, "PUT", value);
  }
  delete(id: string, revision: number): void {
    if (this.entries.get(id)?.revision !== revision) throw new Error("wrong last sequence");
    this.#put(id, "DEL", "");
  }
  #put(id: string, operation: string, value: string): number {
    this.#sequence += 1;
    this.entries.set(id, { revision: this.#sequence, operation, value });
    return this.#sequence;
  }
}

/** The tool's own store of effects by key: what it made, and how many times (the oracle counts). */
interface Effects {
  readonly made: Map<string, { output: { by: string; n: number }; count: number; untold: number }>;
  /** What the tool's recovery found on each takeover: the earlier run's effect, or none. */
  readonly recovered: { landed: number; absent: number };
}

/** One node process: its ledger, its tools and its alive subject; dead once killed. */
interface Instance {
  readonly name: string;
  readonly alive: string;
  dead: boolean;
  readonly died: Promise<"node_lost">;
  kill(): void;
  readonly toolset: ToolSet;
  once(tool: ToolName, key: string, args: unknown): Promise<KeyedOutcome>;
}

interface World {
  readonly random: Random;
  readonly kv: MemoryKv;
  readonly effects: Effects;
  readonly instances: Map<string, Instance>;
  /** A ledger that forgets to tell the tool it takes over (a mutant the oracle must catch). */
  readonly forgetTakeover: boolean;
  generation: number;
}

function startInstance(world: World, slot: string): Instance {
  const { random, kv, effects } = world;
  world.generation += 1;
  const name = `${slot}#${world.generation}`;
  let onDeath: (value: "node_lost") => void = () => {};
  const died = new Promise<"node_lost">((resolve) => {
    onDeath = resolve;
  });
  /** Awaited on this node: a few turns, and never again once it is dead. */
  const step = async () => {
    await hop(random);
    if (instance.dead) await never;
  };
  const guarded = async <T>(write: () => T, lossy: boolean): Promise<T> => {
    await step();
    // The broker does not take the write (an outage); the node tries again.
    if (lossy && random() < 0.05) throw new Error("TIMEOUT: the broker did not answer");
    const result = write();
    await step();
    return result;
  };
  const store: LedgerStore = {
    create: (id, value) => guarded(() => kv.create(id, value), false),
    update: (id, value, revision) => guarded(() => kv.update(id, value, revision), true),
    get: (id) => guarded(() => kv.entries.get(id) ?? null, false),
    delete: (id, revision) => guarded(() => kv.delete(id, revision), true),
    isGone: async (alive) => {
      await step();
      return world.instances.get(alive)?.dead ?? true;
    },
  };
  const make = async (key: string, takeover: ToolTakeover | undefined) => {
    await step();
    const made = effects.made.get(key);
    const output = { by: name, n: (made?.count ?? 0) + 1 };
    effects.made.set(key, {
      output: made?.output ?? output,
      count: output.n,
      // A run not told it takes a key over: more than one under a key is a ledger that ran it twice blind.
      untold: (made?.untold ?? 0) + (takeover === undefined ? 1 : 0),
    });
    await step();
    return output;
  };
  const recover = async (key: string) => {
    await step();
    const made = effects.made.get(key);
    effects.recovered[made === undefined ? "absent" : "landed"] += 1;
    return made === undefined ? { landed: false as const } : { landed: true as const, output: made.output };
  };
  const input = z.object({ id: z.string() });
  const toolset: ToolSet = createToolSet([
    defineTool({
      name: "apply",
      description: "an effect kept by key, with recovery",
      input,
      execute: (_args, context) => make(context.idempotencyKey, context.takeover),
      recover: (_args, context) => recover(context.idempotencyKey),
    }),
    defineTool({
      name: "blind",
      description: "an effect kept by key, without recovery",
      input,
      execute: (_args, context) => make(context.idempotencyKey, context.takeover),
    }),
    defineTool({
      name: "lookup",
      description: "a read, run again on a takeover",
      input,
      annotations: { readOnlyHint: true },
      execute: async (args) => {
        await step();
        return { read: args.id };
      },
    }),
  ]);
  const ledger = createKeyedOnce({
    module: "m",
    node: name,
    logger: silentLogger,
    open: async () => store,
    maxRecordBytes: () => 1 << 20,
    isClosed: () => instance.dead,
    pollMs: 1,
    persistDelayMs: [1, 4],
    // A killed instance here never comes back: take its keys over at once.
    goneAfterMs: 0,
  });
  const instance: Instance = {
    name,
    alive: `m.alive.${name}`,
    dead: false,
    died,
    kill() {
      instance.dead = true;
      onDeath("node_lost");
    },
    toolset,
    once: (tool, key, args) =>
      keyedRun(
        { module: "m", logger: silentLogger, alive: instance.alive },
        ledger,
        { tool, key, args, timeout: 30_000, signal: new AbortController().signal },
        (takeover) => serve(tool, key, args, world.forgetTakeover ? undefined : takeover),
      ),
  };
  // What serve-module does with a keyed call: the tool called with the takeover, when there is one.
  const serve = async (tool: ToolName, key: string, args: unknown, takeover: ToolTakeover | undefined) => {
    const called = await toolset.call(tool, args, {
      idempotencyKey: key,
      timeoutMs: 0,
      ...(takeover === undefined ? {} : { takeover }),
    });
    return called.ok
      ? { ok: true as const, output: called.output }
      : { ok: false as const, error: called.error };
  };
  world.instances.set(instance.alive, instance);
  return instance;
}

interface Verdict {
  /** How many times the tool made its effect under the key. */
  readonly effects: number;
  /** How many of those runs were not told they took the key over. */
  readonly untold: number;
  readonly answers: readonly KeyedOutcome[];
  readonly recovered: { readonly landed: number; readonly absent: number };
}

/**
 * One key's life: callers (a durable driver and its successors) call it on random slots, concurrently
 * and one after another, retrying what comes back `node_lost` or retryable, while a killer SIGKILLs
 * and restarts random slots; then the killer stops and a last caller asks until it has an answer.
 */
async function scenario(
  seed: number,
  tool: "apply" | "blind" | "lookup",
  forgetTakeover = false,
): Promise<Verdict> {
  const random = seeded(seed);
  const world: World = {
    random,
    kv: new MemoryKv(),
    effects: { made: new Map(), recovered: { landed: 0, absent: 0 } },
    instances: new Map(),
    forgetTakeover,
    generation: 0,
  };
  const slots = new Map<string, Instance>(["a", "b", "c"].map((slot) => [slot, startInstance(world, slot)]));
  const pick = () => [...slots.values()][Math.floor(random() * slots.size)] as Instance;
  const key = `run-${seed}:step-0`;
  const args = { id: key };
  const answers: KeyedOutcome[] = [];
  let killing = true;
  const killer = (async () => {
    while (killing) {
      await hop(random);
      if (random() < 0.15) {
        const [slot, instance] = [...slots][Math.floor(random() * slots.size)] as [string, Instance];
        instance.kill();
        await hop(random);
        slots.set(slot, startInstance(world, slot));
      }
    }
  })();
  /** One caller: asks until it gets an answer that is not node_lost nor retryable, or gives up. */
  const caller = async (tries: number) => {
    for (let attempt = 0; attempt < tries; attempt++) {
      const instance = pick();
      const answer = await Promise.race([instance.once(tool, key, args), instance.died]);
      if (answer === "node_lost" || (!answer.ok && answer.error.retryable)) continue;
      answers.push(answer);
      return;
    }
  };
  await Promise.all(
    Array.from({ length: 1 + Math.floor(random() * 4) }, () => caller(1 + Math.floor(random() * 3))),
  );
  killing = false;
  await killer;
  await caller(1_000);
  const made = world.effects.made.get(key);
  return {
    effects: made?.count ?? 0,
    untold: made?.untold ?? 0,
    answers,
    recovered: world.effects.recovered,
  };
}

const interleavings = Number(process.env.TACKLE_KEYED_ONCE_INTERLEAVINGS ?? 3000);

async function many(count: number, run: (seed: number) => Promise<Verdict>): Promise<Verdict[]> {
  const verdicts: Verdict[] = [];
  for (let start = 0; start < count; start += 100) {
    const batch = Array.from({ length: Math.min(100, count - start) }, (_, index) => run(start + index + 1));
    verdicts.push(...(await Promise.all(batch)));
  }
  return verdicts;
}

test(`a tool with recovery: ${interleavings} interleavings of node kills, its effect exactly once, every answer its output`, async (t) => {
  const verdicts = await many(interleavings, (seed) => scenario(seed * 7919, "apply"));
  const landed = verdicts.reduce((sum, verdict) => sum + verdict.recovered.landed, 0);
  const absent = verdicts.reduce((sum, verdict) => sum + verdict.recovered.absent, 0);
  t.diagnostic(
    `takeovers: ${landed} found the earlier run's effect (answered by recover), ${absent} did not (run there)`,
  );
  // The kills reach both sides of the effect: takeovers that found it, and takeovers that ran it.
  assert.ok(landed > 0 && absent > 0, `landed ${landed}, absent ${absent}`);
  for (const [index, verdict] of verdicts.entries()) {
    assert.equal(verdict.effects, 1, `interleaving ${index + 1}: the effect made ${verdict.effects} times`);
    assert.ok(verdict.answers.length > 0, `interleaving ${index + 1}: no answer`);
    const [first] = verdict.answers;
    for (const answer of verdict.answers) {
      assert.deepEqual(answer, first, `interleaving ${index + 1}: answers differ`);
      assert.ok(answer.ok, `interleaving ${index + 1}: ${JSON.stringify(answer)}`);
      assert.equal((answer.output as { n: number }).n, 1);
    }
  }
});

test("a tool without recovery: run again only on a takeover, and told so; never twice untold", async () => {
  const verdicts = await many(Math.ceil(interleavings / 3), (seed) => scenario(seed * 104_729, "blind"));
  let again = 0;
  for (const [index, verdict] of verdicts.entries()) {
    assert.ok(verdict.effects >= 1, `interleaving ${index + 1}: the effect never made`);
    assert.ok(
      verdict.untold <= 1,
      `interleaving ${index + 1}: ${verdict.untold} runs not told of a takeover`,
    );
    assert.ok(verdict.answers.length > 0, `interleaving ${index + 1}: no answer`);
    for (const answer of verdict.answers)
      assert.ok(answer.ok, `interleaving ${index + 1}: ${JSON.stringify(answer)}`);
    if (verdict.effects > 1) again += 1;
  }
  // The kills reach the window only the tool could close: some keys' effects are made again, told.
  assert.ok(again > 0, "no interleaving ran a key again on a takeover");
});

test("a read-only tool is run again on a takeover, and answered", async () => {
  const verdicts = await many(300, (seed) => scenario(seed * 31, "lookup"));
  for (const [index, verdict] of verdicts.entries()) {
    assert.ok(verdict.answers.length > 0, `interleaving ${index + 1}: no answer`);
    for (const answer of verdict.answers)
      assert.deepEqual(answer, { ok: true, output: { read: `run-${(index + 1) * 31}:step-0` } });
  }
});

test("the oracle catches a ledger that takes a key over without telling the tool", async () => {
  const verdicts = await many(Math.ceil(interleavings / 3), (seed) => scenario(seed * 7919, "apply", true));
  const twice = verdicts.filter((verdict) => verdict.effects > 1).length;
  assert.ok(twice > 0, "no interleaving made the effect twice: the kills miss the window");
});
