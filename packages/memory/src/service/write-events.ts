/**
 * Conversation events, one or a batch: each event, the episode its turn is kept as (ADR 0361) and
 * the memories extracted from a user turn commit together, in a few statements for the whole batch
 * (an import of 600 turns wrote each turn in about seven round trips: 17.8 s on PostgreSQL).
 */
import { randomUUID } from "node:crypto";
import { MemoryError } from "../errors/memory-error.ts";
import {
  type WriteEventRequest,
  type WriteEventResponse,
  writeEventRequestSchema,
} from "../schemas/event.ts";
import { MEMORY_KINDS, type Memory } from "../schemas/memory.ts";
import { type MemoryScope, pickScope, scopeKey } from "../scope/memory-scope.ts";
import type { StoredEvent, StoredMemory } from "../store/memory-store.ts";
import { cosine } from "./embedder.ts";
import { episodeOf, eventEpisodeId } from "./event-episode.ts";
import { type ExtractedMemory, extractMemories } from "./extract-memories.ts";
import { importedMemoryId, newMemory } from "./new-memory.ts";
import { parseRequest } from "./parse-request.ts";
import {
  duplicateCosine,
  duplicateSimilarity,
  publicEvent,
  publicMemory,
  type ServiceContext,
} from "./service-context.ts";
import { queryTerms, textSimilarity } from "./text.ts";

/** What an extracted fact is checked against: not the episodes (ADR 0361), as the novelty check does. */
const distilledKinds = MEMORY_KINDS.filter((kind) => kind !== "episode");

interface PlannedEvent {
  readonly scope: MemoryScope;
  readonly importJobId: string | undefined;
  readonly event: Omit<StoredEvent, "seq">;
  readonly episode: { content: string; speaker: string } | undefined;
  readonly episodeVector: Float32Array | undefined;
  readonly found: readonly ExtractedMemory[];
  readonly vectors: readonly (Float32Array | undefined)[];
}

interface Fact {
  readonly event: number;
  readonly id: string | undefined;
  readonly extracted: ExtractedMemory;
  readonly embedding: Float32Array | undefined;
  readonly scope: MemoryScope;
  /**
   * When the fact is written: after its turn's event, by a millisecond at least, so a fact that ranks
   * equal with its own turn's episode (same words) comes first as the later-written, every time.
   */
  readonly at: string;
}

/** Parses each request and embeds every text of the batch in one model call, before any transaction. */
async function planEvents(
  { embedder, nowIso }: ServiceContext,
  tenantId: string,
  requests: readonly WriteEventRequest[],
  byJob: boolean,
): Promise<PlannedEvent[]> {
  const at = nowIso();
  const parsed = requests.map((request) => {
    const input = parseRequest(writeEventRequestSchema, request);
    const metadata = input.metadata ?? {};
    const importJobId = typeof metadata.importJobId === "string" ? metadata.importJobId : undefined;
    const scope = pickScope(input);
    const event: Omit<StoredEvent, "seq"> = {
      id: randomUUID(),
      tenantId,
      ...(input.customId ? { customId: input.customId } : {}),
      role: input.role,
      content: input.content,
      ...scope,
      metadata,
      source: importJobId ? "import" : "api",
      ...(importJobId ? { importJobId } : {}),
      occurredAt: input.occurredAt ? new Date(input.occurredAt).toISOString() : at,
      createdAt: at,
      // A job's events carry the metadata the service wrote for them (an import's job, conversation,
      // turn and speaker, each bounded): charged nothing (ADR 0563). A caller's is charged as sent.
      ...(byJob ? { metadataCharge: 0 } : {}),
    };
    // A user's or an assistant's turn is also kept as an episode that search ranks (ADR 0361).
    const episode = episodeOf(input);
    const found = input.infer && input.role === "user" ? extractMemories(input.content) : [];
    return { scope, importJobId, event, episode, found };
  });
  const texts = parsed.flatMap((item) => [
    ...(item.episode ? [item.episode.content] : []),
    ...item.found.map((found) => found.content),
  ]);
  const embedded = embedder && texts.length > 0 ? await embedder.embed(texts) : undefined;
  let next = 0;
  return parsed.map((item) => {
    const episodeVector = item.episode ? embedded?.[next++] : undefined;
    const vectors = item.found.map(() => embedded?.[next++]);
    return { ...item, episodeVector, vectors };
  });
}

/**
 * For each fact in order, the memory that already states it: stored (one candidate read per scope
 * for the batch) or kept earlier in the batch, by word overlap, or by cosine with embeddings.
 */
async function findDuplicates({ store }: ServiceContext, tenantId: string, facts: readonly Fact[]) {
  const byScope = new Map<string, Fact[]>();
  for (const fact of facts) {
    const key = scopeKey(fact.scope);
    byScope.set(key, [...(byScope.get(key) ?? []), fact]);
  }
  const answers = new Map<Fact, StoredMemory | undefined>();
  for (const group of byScope.values()) {
    const scope = group[0]!.scope;
    const candidates = await store.candidateMemories(
      tenantId,
      scope,
      group.map((fact) => {
        const terms = queryTerms(fact.extracted.content);
        // Word overlap of 0.9 leaves room for no missing word below ten words (as the novelty check).
        const every = !fact.embedding && Math.floor(terms.length * (1 - duplicateSimilarity) + 1e-9) === 0;
        return { terms, every };
      }),
      { limit: 10, kinds: distilledKinds },
    );
    const embedded = group.some((fact) => fact.embedding)
      ? await store.embeddedMemories(tenantId, scope, distilledKinds)
      : [];
    const kept: StoredMemory[] = [];
    for (const [index, fact] of group.entries()) {
      const content = fact.extracted.content;
      let best: { memory: StoredMemory; similarity: number; byVector: boolean } | undefined;
      for (const memory of [...candidates[index]!, ...kept]) {
        const similarity = textSimilarity(content, memory.content);
        if (!best || similarity > best.similarity) best = { memory, similarity, byVector: false };
      }
      if (fact.embedding && (!best || best.similarity < duplicateSimilarity)) {
        for (const memory of [...embedded, ...kept]) {
          if (!memory.embedding) continue;
          const similarity = cosine(fact.embedding, memory.embedding);
          if (similarity >= duplicateCosine && (!best || similarity > best.similarity)) {
            best = { memory, similarity, byVector: true };
          }
        }
      }
      const threshold = best?.byVector ? duplicateCosine : duplicateSimilarity;
      const duplicate = best && best.similarity >= threshold ? best.memory : undefined;
      answers.set(fact, duplicate);
      if (!duplicate) kept.push(factMemory(tenantId, fact, provenanceOf(undefined, undefined)));
    }
  }
  return answers;
}

function factMemory(tenantId: string, fact: Fact, provenance: Memory["provenance"]): StoredMemory {
  return newMemory(tenantId, fact.at, {
    ...(fact.id === undefined ? {} : { id: fact.id }),
    scope: fact.scope,
    content: fact.extracted.content,
    kind: fact.extracted.kind,
    provenance,
    dedupe: true,
    embedding: fact.embedding,
  });
}

function provenanceOf(importJobId: string | undefined, eventId: string | undefined): Memory["provenance"] {
  return {
    source: importJobId ? "import" : "event",
    eventIds: eventId === undefined ? [] : [eventId],
    ...(importJobId ? { importJobId } : {}),
    derivedFrom: [],
  };
}

function supersededBy(memory: StoredMemory, holder: StoredMemory): StoredMemory {
  const { embedding: _embedding, ...rest } = memory;
  return { ...rest, status: "superseded", supersededBy: holder.id };
}

/** Inside the batch's transaction: events, then episodes and facts in the events' order. */
async function commitEvents(
  context: ServiceContext,
  tenantId: string,
  planned: readonly PlannedEvent[],
): Promise<WriteEventResponse[]> {
  const { store, nowIso } = context;
  const appended = await store.appendEvents(planned.map((item) => item.event));
  const written = nowIso();
  // The write that created an event writes what it holds, so a retried write adds nothing twice. A
  // rerun of the import job that stored the event (its process killed before the commit of what
  // followed, under an earlier version) writes again: what is kept is found, the rest added.
  const writes = planned.map((item, index) => {
    const { event, created } = appended[index]!;
    // A custom id is unique in the tenant: one already taken in another scope is refused without
    // answering that event (its id and text belong to another identity).
    if (!created && scopeKey(pickScope(event)) !== scopeKey(item.scope)) {
      throw new MemoryError(
        "conflict",
        "That customId is already used by an event of another scope; choose another",
        409,
      );
    }
    const rerun = !created && item.importJobId !== undefined && event.importJobId === item.importJobId;
    return { item, event, created, writes: created || rerun };
  });
  const episodeIds = writes.flatMap(({ item, event, writes: due }) =>
    due && item.episode ? [eventEpisodeId(tenantId, event.id)] : [],
  );
  // An import's memories have ids of their fact: one the import made before is never made again,
  // whatever became of it (a memory the user deleted stays deleted).
  const facts: Fact[] = writes.flatMap(({ item, writes: due }, index) =>
    due
      ? item.found.map((extracted, position) => ({
          event: index,
          id: item.importJobId ? importedMemoryId(tenantId, item.scope, extracted.content) : undefined,
          extracted,
          embedding: item.vectors[position],
          scope: item.scope,
          at: new Date(Math.max(Date.parse(written), Date.parse(item.event.createdAt) + 1)).toISOString(),
        }))
      : [],
  );
  const known = [...episodeIds, ...facts.flatMap((fact) => (fact.id === undefined ? [] : [fact.id]))];
  const madeBefore = new Set((await store.getMemories(tenantId, known)).map((memory) => memory.id));
  const newFacts = facts.filter((fact) => fact.id === undefined || !madeBefore.has(fact.id));
  const duplicateOf = await findDuplicates(context, tenantId, newFacts);

  const inserts: { memory: StoredMemory; fact?: Fact }[] = [];
  const superseded: StoredMemory[] = [];
  for (const [index, { item, event, writes: due }] of writes.entries()) {
    const episodeId = eventEpisodeId(tenantId, event.id);
    if (due && item.episode && !madeBefore.has(episodeId)) {
      inserts.push({
        memory: newMemory(tenantId, event.occurredAt, {
          id: episodeId,
          scope: pickScope(event),
          content: item.episode.content,
          kind: "episode",
          metadata: { speaker: item.episode.speaker, role: event.role },
          // The service's own keys (ADR 0563): the caller paid for what it sent on the event.
          metadataCharge: 0,
          provenance: provenanceOf(event.importJobId, event.id),
          dedupe: false,
          embedding: item.episodeVector,
        }),
      });
    }
    for (const fact of newFacts.filter((candidate) => candidate.event === index)) {
      const memory = factMemory(tenantId, fact, provenanceOf(item.importJobId, event.id));
      const duplicate = duplicateOf.get(fact);
      if (!duplicate) inserts.push({ memory, fact });
      // Another memory (an API add, a live turn) already holds the fact: the import's own statement
      // of it is kept under its id, superseded by that memory, so a rerun of the job finds it made
      // and never makes it again, whatever the user did to that memory since.
      else if (fact.id !== undefined && duplicate.id !== fact.id) {
        inserts.push({ memory: supersededBy(memory, duplicate) });
      }
    }
  }
  const inserted = await store.insertMemories(inserts.map((insert) => insert.memory));
  const memories: Memory[][] = planned.map(() => []);
  for (const [index, { fact, memory }] of inserts.entries()) {
    if (!fact) continue;
    const result = inserted[index]!;
    if (result.created) memories[fact.event]!.push(publicMemory(result.memory));
    else if (fact.id !== undefined && result.memory.id !== fact.id) {
      superseded.push(supersededBy(memory, result.memory));
    }
  }
  // Held by a memory written between the check and the insert: superseded the same way.
  if (superseded.length > 0) await store.insertMemories(superseded);
  return writes.map(({ event, created }, index) => ({
    event: publicEvent(event),
    created,
    memories: memories[index]!,
  }));
}

export function createWriteEvents(context: ServiceContext) {
  /**
   * Writes the events in order in one transaction: all stored, or none. Every text is embedded before
   * the transaction, in one model call, so no model call is made while it holds the store.
   */
  async function writeEvents(
    tenantId: string,
    requests: readonly WriteEventRequest[],
    options: { readonly jobId?: string } = {},
  ): Promise<WriteEventResponse[]> {
    if (requests.length === 0) return [];
    const planned = await planEvents(context, tenantId, requests, options.jobId !== undefined);
    const { store } = context;
    return store.withTransaction(async () => {
      const answers = await commitEvents(context, tenantId, planned);
      // A job's batch commits only while its job is stored and running (ADR 0561): a purge of its
      // scope deleted it, and its turns, read from input stored before the purge, must not return.
      // Asked after the rows: on PostgreSQL the batch holds the tenant's counter row by then, which a
      // purge takes first, so the purge has committed before this read or starts after this commit.
      if (options.jobId !== undefined && !(await store.jobRunning(tenantId, options.jobId))) {
        throw MemoryError.notFound("Job", options.jobId);
      }
      return answers;
    });
  }

  return { writeEvents };
}
