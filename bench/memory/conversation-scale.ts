/**
 * Conversations at the sizes users reach (`conversation-latency.ts --scale=…`): a scope of N turns in
 * a tenant of M (M / N users of N turns), on each store, then
 *   - warm search p50 / p95 (the scope's questions, no write between);
 *   - the first search after a write to the scope, and after another user's write in the tenant;
 *   - a chat: write a turn, search, write, search (and the memory rows the store read per search);
 *   - the process's RSS and heap (after a collection, with `--expose-gc`);
 * beside wink-bm25-text-search and MiniSearch over the same scope; with `--users=1000x200`, a tenant of
 * that many users searched round robin, then chatting round robin, and its RSS and heap. PostgreSQL
 * is analyzed after the build, as autovacuum keeps a database that grew to that size.
 * Turns as users give them: the long hand-written dev conversations (eval/long-1..32), then generator
 * B's dialogues (eval/dialogues.json), each user starting at a place of its own in that pool.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import {
  createMemoryService,
  createSqliteStore,
  type MemoryServiceOptions,
  type MemoryStore,
} from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase } from "@tackle/test-support";
import pg from "pg";
import { type Conversation, type EvalSet, loadSets } from "./eval-sets.ts";
import { libraries } from "./library-baselines.ts";

export interface ScaleOptions {
  readonly stores: readonly string[];
  /** `600:6000,6000:60000`: scope turns, tenant turns. */
  readonly sizes: string;
  /** `1000x200`: users, turns each (none: skip the many-users table). */
  readonly users: string | undefined;
  /** The embedding options the service runs with (none: BM25 alone). */
  readonly vectors: Pick<MemoryServiceOptions, "embeddingModel" | "vectorWeight">;
  readonly label: string;
}

export const median = (values: readonly number[]) => {
  const sorted = [...values].sort((left, right) => left - right);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? 0;
};
export const percentile = (values: readonly number[], share: number) => {
  const sorted = [...values].sort((left, right) => left - right);
  return sorted[Math.min(sorted.length - 1, Math.floor(share * sorted.length))] ?? 0;
};

const batch = 200;
const day = 86_400_000;
const year = 365 * day;
const scaleStart = Date.parse("2025-01-01T08:00:00Z");
/** Turns users give: the long hand-written dev conversations, then generator B's dialogues, in a row. */
const scalePool = [...loadSets("long-dev")[0]!.conversations, ...loadSets("dialogues")[0]!.conversations];
const poolTurns = scalePool.flatMap((source, index) =>
  source.sessions.flatMap((session) => session.turns.map((turn) => ({ ...turn, source: index }))),
);

/**
 * User `user`'s first `count` turns: the pool's turns from a place of its own (user 0 from the first),
 * round and round; its questions are those of the conversations its turns come from.
 */
function userTurns(user: number, count: number) {
  const start = (user * 7919) % poolTurns.length;
  const turns = Array.from({ length: count }, (_, index) => {
    const turn = poolTurns[(start + index) % poolTurns.length]!;
    return { content: `${turn.speaker}: ${turn.text}`, speaker: turn.speaker, source: turn.source };
  });
  const sources = [...new Set(turns.map((turn) => turn.source))];
  const questions = sources.flatMap((source) => scalePool[source]!.questions.map((item) => item.question));
  return { turns, questions: questions.slice(0, 100) };
}

/** Each store, and what settles it after the build (PostgreSQL: the statistics autovacuum would gather). */
const openers: Record<
  string,
  () => Promise<{ store: MemoryStore; settle: () => Promise<void>; drop: () => Promise<void> }>
> = {
  sqlite: async () => {
    const directory = mkdtempSync(join(tmpdir(), "tackle-conversation-scale-"));
    return {
      store: createSqliteStore({ path: join(directory, "memory.db") }),
      settle: async () => undefined,
      drop: async () => rmSync(directory, { recursive: true, force: true }),
    };
  },
  postgres: async () => {
    const database = await createTestDatabase("tackle_memory_conversation_scale");
    return {
      store: await createPostgresStore({ connectionString: database.url }),
      // Fresh tables have none: the planner then reads a scope through the tenant's rows (75–135 ms
      // for 200 of 200,000), where a database autovacuum has analyzed reads the scope's own rows.
      settle: async () => {
        const client = new pg.Client({ connectionString: database.url });
        await client.connect();
        await client.query("ANALYZE");
        await client.end();
      },
      drop: () => database.drop(),
    };
  },
};

/** The store, counting the memory rows its reads answer (the work a search makes the store do). */
function counted(store: MemoryStore) {
  const reads = { rows: 0 };
  const methods = new Set([
    "listMemories",
    "searchMemories",
    "getMemories",
    "neighbourMemories",
    "embeddedMemories",
    "memoryChanges",
  ]);
  const proxy = new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      if (typeof value !== "function") return value;
      if (typeof key !== "string" || !methods.has(key)) return value.bind(target);
      return async (...parameters: unknown[]) => {
        const result = await value.apply(target, parameters);
        reads.rows +=
          result instanceof Map
            ? [...result.values()].reduce((sum, list) => sum + list.length, 0)
            : Array.isArray(result)
              ? result.length
              : (result as { rows: unknown[] }).rows.length;
        return result;
      };
    },
  });
  return { store: proxy, reads };
}

const heap = () => {
  (globalThis as { gc?: () => void }).gc?.();
  const usage = process.memoryUsage();
  return { rss: usage.rss / 2 ** 20, heap: usage.heapUsed / 2 ** 20 };
};

/** Per search: wall ms, this process's CPU ms (the machine is shared), memory rows the store answered. */
interface Samples {
  wall: number[];
  cpu: number[];
  rows: number[];
}
const samples = (): Samples => ({ wall: [], cpu: [], rows: [] });
const cpuNow = () => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
};
/** `p50 / p95 (CPU p50)` in ms. */
const cell = (values: Samples) =>
  `${median(values.wall).toFixed(2)} / ${percentile(values.wall, 0.95).toFixed(2)} (${median(values.cpu).toFixed(2)})`;
const rowsCell = (values: Samples) => median(values.rows).toFixed(0);

/** A tenant of `users` × `turns`, written 200 turns a batch, and a service over it. */
async function scaleTenant(kind: string, users: number, turns: number, vectors: ScaleOptions["vectors"]) {
  const { store: raw, settle, drop } = await openers[kind]!();
  const { store, reads } = counted(raw);
  let now = new Date(scaleStart);
  const service = createMemoryService({ store, now: () => now, ...vectors });
  const started = performance.now();
  for (let user = 0; user < users; user += 1) {
    const written = userTurns(user, turns).turns;
    for (let from = 0; from < written.length; from += batch) {
      now = new Date(scaleStart + (from / turns) * year);
      await service.addBatch("bench", {
        userId: `u${user}`,
        memories: written.slice(from, from + batch).map((turn) => ({
          kind: "episode" as const,
          content: turn.content,
          metadata: { speaker: turn.speaker },
        })),
      });
    }
  }
  const buildSeconds = (performance.now() - started) / 1000;
  await settle();
  now = new Date(scaleStart + year + day);
  // Chat turns come from a user no scope holds, each once.
  const chat = userTurns(users + 3, 20_000).turns;
  let chatted = 0;
  const tick = () => {
    now = new Date(now.getTime() + 60_000);
  };
  return {
    service,
    buildSeconds,
    close: async () => {
      await service.close();
      await drop();
    },
    async write(userId: string) {
      tick();
      const turn = chat[chatted++ % chat.length]!;
      await service.add("bench", {
        userId,
        kind: "episode",
        content: turn.content,
        metadata: { speaker: turn.speaker },
      });
    },
    async search(into: Samples | undefined, userId: string, query: string) {
      const at = performance.now();
      const cpuAt = cpuNow();
      const before = reads.rows;
      await service.search("bench", { userId, query, limit: 10 });
      into?.wall.push(performance.now() - at);
      into?.cpu.push(cpuNow() - cpuAt);
      into?.rows.push(reads.rows - before);
    },
  };
}

async function scaleSize(kind: string, scope: number, tenantTurns: number, vectors: ScaleOptions["vectors"]) {
  const users = Math.max(2, Math.round(tenantTurns / scope));
  const tenant = await scaleTenant(kind, users, scope, vectors);
  try {
    const { questions } = userTurns(0, scope);
    let asked = 0;
    const ask = (into?: Samples) => tenant.search(into, "u0", questions[asked++ % questions.length]!);
    const warm = samples();
    const afterOwn = samples();
    const afterOther = samples();
    const chat = samples();
    const writes: number[] = [];
    for (let index = 0; index < 5; index += 1) await ask();
    for (let index = 0; index < 100; index += 1) await ask(warm);
    for (let index = 0; index < 30; index += 1) {
      await tenant.write("u0");
      await ask(afterOwn);
      await ask();
      await tenant.write("u1");
      await ask(afterOther);
      await ask();
    }
    for (let index = 0; index < 60; index += 1) {
      const at = performance.now();
      await tenant.write("u0");
      writes.push(performance.now() - at);
      await ask(chat);
    }
    const memory = heap();
    return {
      kind,
      scope,
      users,
      buildSeconds: tenant.buildSeconds,
      warm,
      afterOwn,
      afterOther,
      chat,
      writes,
      memory,
    };
  } finally {
    await tenant.close();
  }
}

async function scaleUsers(kind: string, users: number, turns: number, vectors: ScaleOptions["vectors"]) {
  const tenant = await scaleTenant(kind, users, turns, vectors);
  try {
    const built = heap();
    const questions = Array.from({ length: users }, (_, user) => userTurns(user, turns).questions);
    const roundRobin = samples();
    for (let round = 0; round < 3; round += 1) {
      for (let user = 0; user < users; user += 1) {
        await tenant.search(round === 0 ? undefined : roundRobin, `u${user}`, questions[user]![round]!);
      }
    }
    const searched = heap();
    const chat = samples();
    for (let user = 0; user < users; user += 1) {
      await tenant.write(`u${user}`);
      await tenant.search(chat, `u${user}`, questions[user]![3]!);
    }
    const chatted = heap();
    return {
      kind,
      users,
      turns,
      buildSeconds: tenant.buildSeconds,
      roundRobin,
      chat,
      built,
      searched,
      chatted,
    };
  } finally {
    await tenant.close();
  }
}

const scaleSet: EvalSet = { name: "scale", heldOut: false, speakers: false, conversations: [] };
const asTurns = (turns: readonly { content: string; speaker: string }[]) =>
  turns.map((turn, index) => ({ id: `t${index}`, speaker: turn.speaker, text: turn.content }));

/** Each library over user 0's scope: its warm search. */
function scaleLibraries(scope: number) {
  const { turns, questions } = userTurns(0, scope);
  const conversation: Conversation = {
    id: "u0",
    split: "dev",
    sessions: [{ id: 1, date: "2025-01-01", turns: asTurns(turns) }],
    questions: [],
  };
  return libraries.map((library) => {
    const search = library.index(scaleSet, conversation);
    const times = samples();
    for (let index = 0; index < 105; index += 1) {
      const at = performance.now();
      const cpuAt = cpuNow();
      search(questions[index % questions.length]!, 10);
      if (index >= 5) {
        times.wall.push(performance.now() - at);
        times.cpu.push(cpuNow() - cpuAt);
      }
    }
    return { label: library.label, times };
  });
}

/** Each library's heap for `indexes` users' indexes held at once. */
function libraryHeap(indexes: number, turns: number) {
  return libraries.map((library) => {
    const before = heap().heap;
    const held = Array.from({ length: indexes }, (_, user) =>
      library.index(scaleSet, {
        id: `u${user}`,
        split: "dev",
        sessions: [{ id: 1, date: "2025-01-01", turns: asTurns(userTurns(user, turns).turns) }],
        questions: [],
      }),
    );
    const after = heap().heap;
    return { label: library.label, megabytes: after - before, held: held.length };
  });
}

export async function runScale({ stores, sizes, users: usersFlag, vectors, label }: ScaleOptions) {
  const pairs = sizes.split(",").map((pair) => pair.split(":").map(Number) as [number, number]);
  const [manyUsers, manyTurns] = (usersFlag ?? "0x0").split("x").map(Number) as [number, number];
  console.log(
    `Node ${process.versions.node}; turns: long-1..32 (hand-written) then eval/dialogues.json, each user from its own place; load ${loadavg()[0]!.toFixed(1)}${label}\n`,
  );
  console.log(
    "| store | scope turns (users × scope in the tenant) | build s | warm search p50 / p95 (CPU p50) ms | first search after a write to the scope | after another user's write | chat: search after each write | chat write p50 ms | memory rows the store answered per chat search | RSS / heap MiB after |",
  );
  console.log("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const [scope, tenantTurns] of pairs) {
    for (const kind of stores) {
      const row = await scaleSize(kind, scope, tenantTurns, vectors);
      console.log(
        `| ${kind} | ${scope} (${row.users} × ${scope}) | ${row.buildSeconds.toFixed(1)} | ${cell(row.warm)} | ${cell(row.afterOwn)} | ${cell(row.afterOther)} | ${cell(row.chat)} | ${median(row.writes).toFixed(2)} | ${rowsCell(row.chat)} | ${row.memory.rss.toFixed(0)} / ${row.memory.heap.toFixed(0)} |`,
      );
    }
    for (const library of scaleLibraries(scope)) {
      console.log(`| ${library.label}, user 0's index | ${scope} | | ${cell(library.times)} | | | | | | |`);
    }
  }
  if (manyUsers === 0) return;
  console.log(
    `\n| store | users × turns | build s | round robin search p50 / p95 (CPU p50) ms | rows answered per search | chat round robin: search after each write | rows answered | RSS / heap MiB: built, searched, chatted |`,
  );
  console.log("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const kind of stores) {
    const row = await scaleUsers(kind, manyUsers, manyTurns, vectors);
    const memory = [row.built, row.searched, row.chatted].map(
      (usage) => `${usage.rss.toFixed(0)} / ${usage.heap.toFixed(0)}`,
    );
    console.log(
      `| ${kind} | ${manyUsers} × ${manyTurns} | ${row.buildSeconds.toFixed(1)} | ${cell(row.roundRobin)} | ${rowsCell(row.roundRobin)} | ${cell(row.chat)} | ${rowsCell(row.chat)} | ${memory.join(", ")} |`,
    );
  }
  // A hundred indexes are enough to weigh one: wink holds over a MiB per 200 turns.
  for (const library of libraryHeap(Math.min(manyUsers, 100), manyTurns)) {
    console.log(
      `| ${library.label}: ${library.held} users' indexes held | ${library.held} × ${manyTurns} | | | | | | heap +${library.megabytes.toFixed(0)} |`,
    );
  }
}
