/**
 * For postgres-faults.property.test.ts: what a round's clients send while the database fails under
 * the service, and the oracle's model of what the store must hold afterwards. Each worker owns the
 * memories it adds (only it updates, deletes or rates them) and its sessions' events, so the model
 * is exact whatever order the workers' calls interleave in.
 */
import assert from "node:assert/strict";
import type { MemoryClient } from "@tackle/memory";
import { type FaultyService, once, pick, unkeyedPost, untilDone } from "./postgres-faults.ts";

export interface ModelMemory {
  readonly id: string;
  word: string;
  content: string;
  status: "active" | "deleted";
  /** The history's changes, oldest first. */
  readonly changes: string[];
  helpful: number;
  unhelpful: number;
  /** Words it held before an update: no search finds it by them. */
  readonly oldWords: string[];
}

export interface Model {
  readonly userId: string;
  readonly memories: Map<string, ModelMemory>;
  /** Words of adds answered 503 without a key: stored at most once. */
  readonly maybeWords: Set<string>;
  /** Words of writes refused: never stored. */
  readonly absentWords: Set<string>;
  /** Per session, the event contents stored exactly once. */
  readonly events: Map<string, string[]>;
  /** Per session, event contents of unkeyed writes answered 503: stored at most once. */
  readonly maybeEvents: Map<string, string[]>;
  readonly jobs: string[];
  /** Users whose scope was purged, with the words they had: nothing of theirs is left. */
  readonly purged: { readonly userId: string; readonly words: string[] }[];
}

export function emptyModel(userId: string): Model {
  return {
    userId,
    memories: new Map(),
    maybeWords: new Set(),
    absentWords: new Set(),
    events: new Map(),
    maybeEvents: new Map(),
    jobs: [],
    purged: [],
  };
}

const push = (map: Map<string, string[]>, key: string, ...values: string[]) =>
  map.set(key, [...(map.get(key) ?? []), ...values]);

export interface Worker {
  readonly name: string;
  readonly client: MemoryClient;
  readonly service: FaultyService;
  readonly random: () => number;
  readonly word: () => string;
  readonly model: Model;
  readonly log: string[];
  /** Keys this worker used, with the request each was first used for. */
  readonly keys: { key: string; label: string; trail: string[] }[];
  counter: number;
}

const keyOf = (worker: Worker, label: string) => {
  worker.counter += 1;
  const key = `${worker.model.userId}-${worker.name}-${worker.counter}`;
  const trail: string[] = [];
  worker.keys.push({ key, label, trail });
  return { key, trail };
};

const mine = (worker: Worker) =>
  [...worker.model.memories.values()].filter(
    (memory) => memory.status === "active" && memory.id.length > 0 && owned(worker, memory),
  );
const owners = new WeakMap<ModelMemory, string>();
const owned = (worker: Worker, memory: ModelMemory) => owners.get(memory) === worker.name;

function remember(worker: Worker, id: string, word: string, content: string) {
  const memory: ModelMemory = {
    id,
    word,
    content,
    status: "active",
    changes: ["create"],
    helpful: 0,
    unhelpful: 0,
    oldWords: [],
  };
  owners.set(memory, worker.name);
  worker.model.memories.set(id, memory);
}

async function keyedAdd(worker: Worker) {
  const word = worker.word();
  const content = `Ada noted ${word} today`;
  const { key, trail } = keyOf(worker, `add ${word}`);
  const userId = worker.model.userId;
  const outcome = await untilDone(`add ${word}`, trail, () =>
    worker.client.add({ userId, kind: "episode", content }, { idempotencyKey: key }),
  );
  assert.ok("ok" in outcome, `add ${word} refused: ${"refused" in outcome && outcome.refused.message}`);
  assert.equal(outcome.ok.memory.content, content);
  remember(worker, outcome.ok.memory.id, word, content);
}

async function unkeyedAdd(worker: Worker) {
  const word = worker.word();
  const content = `Ada noted ${word} today`;
  const answer = await unkeyedPost(worker.service.url, "/v1/memories", {
    userId: worker.model.userId,
    kind: "episode",
    content,
  });
  worker.log.push(`unkeyed add ${word}: ${answer.status}`);
  if (answer.status === 503) worker.model.maybeWords.add(word);
  else remember(worker, (answer.body.memory as { id: string }).id, word, content);
}

async function update(worker: Worker, memory: ModelMemory) {
  const word = worker.word();
  const content = `Ada changed ${word} later`;
  const { key, trail } = keyOf(worker, `update ${memory.id} to ${word}`);
  const outcome = await untilDone(`update ${memory.id}`, trail, () =>
    worker.client.updateMemory(
      memory.id,
      { content },
      { idempotencyKey: key, scope: { userId: worker.model.userId } },
    ),
  );
  assert.ok(
    "ok" in outcome,
    `update ${memory.id} refused: ${"refused" in outcome && outcome.refused.message}`,
  );
  memory.oldWords.push(memory.word);
  memory.word = word;
  memory.content = content;
  memory.changes.push("update");
}

async function remove(worker: Worker, memory: ModelMemory) {
  const { key, trail } = keyOf(worker, `delete ${memory.id}`);
  const outcome = await untilDone(`delete ${memory.id}`, trail, () =>
    worker.client.deleteMemory(
      memory.id,
      {},
      { idempotencyKey: key, scope: { userId: worker.model.userId } },
    ),
  );
  assert.ok("ok" in outcome, `delete ${memory.id} refused`);
  memory.status = "deleted";
  memory.changes.push("delete");
}

async function feedback(worker: Worker, memory: ModelMemory) {
  const rating = worker.random() < 0.5 ? "helpful" : "unhelpful";
  const { key, trail } = keyOf(worker, `${rating} ${memory.id}`);
  const outcome = await untilDone(`feedback ${memory.id}`, trail, () =>
    worker.client.recordFeedback(
      memory.id,
      { rating },
      { idempotencyKey: key, scope: { userId: worker.model.userId } },
    ),
  );
  assert.ok("ok" in outcome, `feedback ${memory.id} refused`);
  memory[rating] += 1;
  memory.changes.push("feedback");
}

async function keyedEvent(worker: Worker) {
  const content = `Assistant said ${worker.word()}`;
  const sessionId = `${worker.model.userId}-${worker.name}`;
  const { key, trail } = keyOf(worker, `event ${content}`);
  const outcome = await untilDone(`event ${content}`, trail, () =>
    worker.client.writeEvent(
      { userId: worker.model.userId, sessionId, role: "assistant", content, infer: false },
      { idempotencyKey: key },
    ),
  );
  assert.ok("ok" in outcome, `event ${content} refused`);
  push(worker.model.events, sessionId, content);
}

async function unkeyedEvent(worker: Worker) {
  const content = `Assistant said ${worker.word()}`;
  const sessionId = `${worker.model.userId}-${worker.name}`;
  const answer = await unkeyedPost(worker.service.url, "/v1/events", {
    userId: worker.model.userId,
    sessionId,
    role: "assistant",
    content,
    infer: false,
  });
  worker.log.push(`unkeyed event ${content}: ${answer.status}`);
  push(answer.status === 503 ? worker.model.maybeEvents : worker.model.events, sessionId, content);
}

async function importTurns(worker: Worker) {
  // Mostly a few turns; one in five long enough to be written in several batches of a hundred (ADR
  // 0370), so faults land inside a running job.
  const length =
    worker.random() < 0.2 ? 120 + Math.floor(worker.random() * 150) : 2 + Math.floor(worker.random() * 3);
  const turns = Array.from({ length }, (_, index) =>
    index % 2 === 0 ? `I said ${worker.word()}` : `You answered ${worker.word()}`,
  );
  worker.counter += 1;
  const sessionId = `${worker.model.userId}-${worker.name}-import-${worker.counter}`;
  const { key, trail } = keyOf(worker, `import ${turns[0]}`);
  const outcome = await untilDone(`import ${turns[0]}`, trail, () =>
    worker.client.importConversations(
      {
        format: "openai",
        userId: worker.model.userId,
        infer: false,
        conversations: [
          {
            sessionId,
            messages: turns.map((content, index) => ({
              role: index % 2 === 0 ? "user" : "assistant",
              content,
            })),
          },
        ],
      },
      { idempotencyKey: key },
    ),
  );
  assert.ok("ok" in outcome, `import ${turns[0]} refused`);
  worker.model.jobs.push(outcome.ok.job.id);
  push(worker.model.events, sessionId, ...turns);
}

/** Another add under a key this worker used: refused `idempotency_key_reused`, stores nothing. */
async function reusedKey(worker: Worker) {
  // A key whose write ended (the purge's adds run beside this worker's calls).
  const used = worker.keys.findLast((one) => one.trail.at(-1)?.startsWith("done"));
  if (used === undefined) return keyedAdd(worker);
  const word = worker.word();
  const trail: string[] = [];
  const outcome = await untilDone(
    `add ${word} under ${used.key} (${used.label})`,
    trail,
    () =>
      worker.client.add(
        { userId: worker.model.userId, kind: "episode", content: `Ada noted ${word} today` },
        { idempotencyKey: used.key },
      ),
    ["idempotency_key_reused"],
  );
  if (!("refused" in outcome)) {
    const { rows } = await worker.service.direct.query(
      "SELECT key, fingerprint, created_at FROM memory_idempotency_keys WHERE key = $1",
      [used.key],
    );
    assert.fail(
      `add ${word} under ${used.key} (${used.label}, answered ${used.trail.join(", ")}) was not refused (answered ${trail.join(", ")}); the key's rows: ${JSON.stringify(rows)}`,
    );
  }
  worker.model.absentWords.add(word);
}

/** A search for one of this worker's memories: when answered, it reads this worker's own writes. */
async function searchOwn(worker: Worker) {
  const targets = [...worker.model.memories.values()].filter((memory) => owned(worker, memory));
  if (targets.length === 0) return;
  const memory = pick(worker.random, targets);
  const answer = await once(`search ${memory.word}`, () =>
    worker.client.search({ userId: worker.model.userId, query: memory.word }),
  );
  if (answer === undefined) return;
  const found = answer.results.filter((result) => result.memory.id === memory.id);
  if (memory.status === "active") {
    assert.equal(found.length, 1, `search ${memory.word} misses ${memory.id}, written before it`);
    assert.equal(found[0]!.memory.content, memory.content, `search ${memory.word}: an old version`);
  } else assert.equal(found.length, 0, `search ${memory.word} finds ${memory.id}, deleted before it`);
}

async function listSome(worker: Worker) {
  await once("list", () => worker.client.listMemories({ userId: worker.model.userId, limit: 50 }));
}

/** One random call of the worker's, as the model allows it. */
export async function act(worker: Worker): Promise<void> {
  const draw = worker.random();
  const targets = mine(worker);
  const target = targets.length > 0 ? pick(worker.random, targets) : undefined;
  if (draw < 0.2) return keyedAdd(worker);
  if (draw < 0.28) return unkeyedAdd(worker);
  if (draw < 0.4 && target) return update(worker, target);
  if (draw < 0.46 && target) return remove(worker, target);
  if (draw < 0.54 && target) return feedback(worker, target);
  if (draw < 0.62) return keyedEvent(worker);
  if (draw < 0.67) return unkeyedEvent(worker);
  if (draw < 0.74) return importTurns(worker);
  if (draw < 0.78) return reusedKey(worker);
  if (draw < 0.92) return searchOwn(worker);
  return listSome(worker);
}

/** A second user's few memories and their purge, retried until done: nothing of theirs is left. */
export async function purgeUser(worker: Worker, userId: string): Promise<void> {
  const words: string[] = [];
  for (let index = 0; index < 2; index += 1) {
    const word = worker.word();
    // Not among the worker's keys: the purge forgets the answers kept for the scope, so a key of these
    // adds may be used again afterwards.
    const key = `${userId}-${index}`;
    const trail: string[] = [];
    const outcome = await untilDone(`add ${word} for ${userId}`, trail, () =>
      worker.client.add(
        { userId, kind: "episode", content: `Ada noted ${word} today` },
        { idempotencyKey: key },
      ),
    );
    assert.ok("ok" in outcome);
    words.push(word);
  }
  const outcome = await untilDone(`purge ${userId}`, [], () => worker.client.purge({ userId }));
  assert.ok("ok" in outcome, `purge ${userId} refused`);
  worker.model.purged.push({ userId, words });
}
