/**
 * Metadata counts against the tenant's `metadataBytes` quota (ADR 0556), on a SQLite file and on
 * PostgreSQL: the JSON text of each memory version's, event's and document's metadata, refused
 * exactly at the bound with nothing stored, given back by a purge, filled by the migration from the
 * rows stored before it; and `status` answers every quota kind, ADR 0551's held kinds included.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createMemoryService, MemoryError, type MemoryService, type MemoryStore } from "@tackle/memory";
import {
  type MetadataSubject,
  metadataFromRows,
  postgresMetadataSubject,
  sqliteMetadataSubject,
} from "./support/metadata-subjects.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-metadata-"));
const subjects: MetadataSubject[] = [];
after(async () => {
  for (const subject of subjects) await subject.close();
  rmSync(directory, { recursive: true, force: true });
});

let files = 0;
const makers = [
  async () => sqliteMetadataSubject(join(directory, `metadata-${++files}.db`)),
  () => postgresMetadataSubject("tackle_memory_metadata"),
];

const bytes = (text: string) => Buffer.byteLength(text, "utf8");
/** Metadata whose JSON text is `size` bytes: `{"note":"…"}` is 11 bytes and the note. */
const sized = (size: number) => ({
  note: "é".repeat(Math.floor((size - 11) / 2)) + "x".repeat((size - 11) % 2),
});

async function refusal(write: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await write;
  } catch (error) {
    assert.ok(MemoryError.isInstance(error), `expected a MemoryError, got ${String(error)}`);
    assert.equal(error.code, "quota_exceeded", error.message);
    assert.equal(error.status, 409);
    assert.equal(error.retryable, false);
    return error.data as Record<string, unknown>;
  }
  assert.fail("the write was not refused");
}

async function withService<T>(
  subject: MetadataSubject,
  maxMetadataBytes: number,
  body: (service: MemoryService, store: MemoryStore) => Promise<T>,
): Promise<T> {
  const store = await subject.open();
  const service = createMemoryService({ store, quotas: { maxMetadataBytes }, resumeJobs: false });
  try {
    return await body(service, store);
  } finally {
    await service.close();
  }
}

const count = async (subject: MetadataSubject, table: string, tenant: string) =>
  Number((await subject.rows(`SELECT count(*) AS n FROM ${table} WHERE tenant_id = ?`, [tenant]))[0]!.n);

async function checkBounds(subject: MetadataSubject) {
  await withService(subject, 100, async (service, store) => {
    const tenant = "meta";
    const scope = { userId: "ada" };
    assert.equal(bytes(JSON.stringify(sized(40))), 40);
    const first = await service.add(tenant, { ...scope, content: "Ada likes tea", metadata: sized(40) });
    assert.equal((await store.usage(tenant)).metadataBytes, 40);
    assert.deepEqual(
      await refusal(service.add(tenant, { ...scope, content: "Ada reads maps", metadata: sized(61) })),
      { kind: "metadataBytes", limit: 100, used: 40, requested: 61 },
    );
    assert.equal(await count(subject, "memory_memories", tenant), 1, "the refused memory is not stored");
    // Exactly at the bound.
    await service.add(tenant, { ...scope, content: "Ada reads maps", metadata: sized(60) });
    assert.equal((await store.usage(tenant)).metadataBytes, 100);
    // Full: a memory without metadata, or with none in it, costs nothing and is stored (ADR 0559);
    // one with metadata is refused, and so is an edit's new version with its metadata.
    assert.equal((await service.add(tenant, { ...scope, content: "Ada sings" })).created, true);
    assert.equal((await service.add(tenant, { ...scope, content: "Ada hums", metadata: {} })).created, true);
    await service.ingestDocument(tenant, { ...scope, title: "Plain", content: "a plain page" });
    assert.equal((await store.usage(tenant)).metadataBytes, 100);
    assert.equal(await metadataFromRows(subject, tenant), 100, "the recount agrees");
    assert.deepEqual(
      await refusal(service.add(tenant, { ...scope, content: "Ada whistles", metadata: { a: 1 } })),
      { kind: "metadataBytes", limit: 100, used: 100, requested: 7 },
    );
    assert.deepEqual(await refusal(service.updateMemory(tenant, first.memory.id, { metadata: sized(20) })), {
      kind: "metadataBytes",
      limit: 100,
      used: 100,
      requested: 20,
    });
    assert.deepEqual((await service.getMemory(tenant, first.memory.id)).memory.metadata, sized(40));
    const event = { ...scope, sessionId: "s", role: "user" as const, content: "hello", infer: false };
    assert.equal(
      (await refusal(service.writeEvent(tenant, { ...event, metadata: { speaker: "Ada" } }))).kind,
      "metadataBytes",
    );
    assert.equal(await count(subject, "memory_events", tenant), 0, "the refused event is not stored");
    const document = { ...scope, title: "Manual", content: "a short manual", metadata: { source: "web" } };
    assert.equal((await refusal(service.ingestDocument(tenant, document))).kind, "metadataBytes");
    assert.equal(await count(subject, "memory_documents", tenant), 1, "the refused document is not stored");
    // A delete is never refused: its version's metadata counts past the limit.
    await service.deleteMemory(tenant, first.memory.id, { reason: "no longer true" });
    assert.equal((await store.usage(tenant)).metadataBytes, 140);
    // Other tenants are unaffected.
    await service.add("neighbour", { userId: "x", content: "elsewhere", metadata: sized(60) });
    // A purge gives the room back; what fits is stored and counted.
    await service.purge(tenant, scope);
    assert.equal((await store.usage(tenant)).metadataBytes, 0);
    await service.writeEvent(tenant, { ...event, metadata: { speaker: "Ada" } });
    await service.ingestDocument(tenant, document);
    const counted = (await store.usage(tenant)).metadataBytes;
    // The event's episode carries `{"speaker":"Ada","role":"user"}`, the service's: not charged (ADR 0563).
    assert.equal(counted, bytes('{"speaker":"Ada"}') + bytes('{"source":"web"}'));
    assert.equal(counted, await metadataFromRows(subject, tenant));
    assert.deepEqual((await service.status(tenant)).quotas?.metadataBytes, { used: counted, limit: 100 });
    assert.equal((await store.usage("neighbour")).metadataBytes, 60);
  });
}

async function importTurns(service: MemoryService, tenant: string, userId: string, turns: number) {
  const { job } = await service.importConversations(tenant, {
    userId,
    sessionId: "imported",
    format: "openai",
    infer: false,
    conversations: [
      {
        id: "chat-1",
        messages: Array.from({ length: turns }, (_, index) => ({
          role: index % 2 === 0 ? "user" : "assistant",
          content: `imported turn ${index}`,
          ...(index === 0 ? { name: "Ada" } : {}),
        })),
      },
    ],
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { job: now } = await service.getJob(tenant, job.id);
    if (now.status === "succeeded" || now.status === "failed") return now;
    assert.ok(Date.now() < deadline, "the import did not finish in time");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * Only what a caller sends is charged (ADR 0563): at its limit a tenant still records conversations
 * sent without metadata (an event's episode carries the speaker and role the service writes), captures
 * turns as the middleware does, and imports transcripts (each event carries the job, conversation and
 * turn the service writes); what a caller sends is refused exactly, `requested` its bytes.
 */
async function checkServicesOwn(subject: MetadataSubject) {
  await withService(subject, 50, async (service, store) => {
    const tenant = "own";
    const scope = { userId: "ada", sessionId: "s" };
    await service.add(tenant, { userId: "ada", content: "Ada likes tea", metadata: sized(50) });
    assert.equal((await store.usage(tenant)).metadataBytes, 50);
    // An event without metadata, with `{}`, and a captured turn (user then assistant, no metadata).
    for (const event of [
      { ...scope, role: "user" as const, content: "I land on Friday", infer: false },
      { ...scope, role: "assistant" as const, content: "Safe travels", metadata: {}, infer: false },
      { ...scope, role: "user" as const, content: "I prefer window seats", customId: "turn-1:user" },
      { ...scope, role: "assistant" as const, content: "Noted", infer: false, customId: "turn-1:assistant" },
    ]) {
      const { event: stored } = await service.writeEvent(tenant, event);
      assert.equal(stored.content, event.content);
    }
    const { memories } = await service.listMemories(tenant, { ...scope, kind: "episode", limit: 10 });
    assert.equal(memories.length, 4, "every turn kept as an episode");
    assert.deepEqual(
      memories.map((memory) => memory.metadata).sort((a, b) => String(a.role).localeCompare(String(b.role))),
      [
        { speaker: "assistant", role: "assistant" },
        { speaker: "assistant", role: "assistant" },
        { speaker: "user", role: "user" },
        { speaker: "user", role: "user" },
      ],
    );
    // An edit of an episode keeping its metadata, and a delete, keep its charge: none.
    await service.updateMemory(tenant, memories[0]!.id, { content: "I land on Saturday" });
    await service.deleteMemory(tenant, memories[1]!.id, { reason: "wrong" });
    const imported = await importTurns(service, tenant, "ada", 6);
    assert.equal(imported.status, "succeeded", JSON.stringify(imported.error));
    assert.equal((await store.usage(tenant)).metadataBytes, 50, "nothing the caller sent was charged");
    assert.equal(await metadataFromRows(subject, tenant), 50);
    // What the caller sends is charged exactly: on an event, and on an episode it edits.
    const named = {
      ...scope,
      role: "user" as const,
      content: "hi",
      metadata: { speaker: "Ada" },
      infer: false,
    };
    assert.deepEqual(await refusal(service.writeEvent(tenant, named)), {
      kind: "metadataBytes",
      limit: 50,
      used: 50,
      requested: bytes('{"speaker":"Ada"}'),
    });
    assert.deepEqual(await refusal(service.updateMemory(tenant, memories[2]!.id, { metadata: { a: 1 } })), {
      kind: "metadataBytes",
      limit: 50,
      used: 50,
      requested: bytes('{"a":1}'),
    });
    // A purge's recount agrees with the charges.
    await service.purge(tenant, { sessionId: "nobody" });
    assert.equal((await store.usage(tenant)).metadataBytes, 50, "a purge's recount");
    await service.purge(tenant, { userId: "ada" });
    assert.equal((await store.usage(tenant)).metadataBytes, 0);
  });
}

/** `status` answers the held kinds (ADR 0551) with what the tenant holds, beside the counters. */
async function checkStatus(subject: MetadataSubject) {
  await withService(subject, Number.POSITIVE_INFINITY, async (service, store) => {
    const tenant = "status";
    await service.selfEdit(tenant, {
      userId: "bo",
      edits: [{ op: "create", label: "notes", limit: 100, text: "Bo: café" }],
    });
    await store.insertJob({
      id: randomUUID(),
      tenantId: tenant,
      type: "import",
      status: "queued",
      userId: "bo",
      input: { conversations: [] },
      createdAt: new Date().toISOString(),
    });
    await service.add(tenant, { userId: "bo", content: "Bo bakes", metadata: { mood: "ü" } });
    const { quotas } = await service.status(tenant);
    assert.deepEqual(quotas, {
      memories: { used: 1, limit: 1_000_000 },
      memoryBytes: { used: bytes("Bo bakes"), limit: 1024 ** 3 },
      events: { used: 0, limit: 10_000_000 },
      eventBytes: { used: 0, limit: 4 * 1024 ** 3 },
      documentBytes: { used: 0, limit: 1024 ** 3 },
      metadataBytes: { used: bytes('{"mood":"ü"}'), limit: null },
      // The block and the two every scope starts with (empty).
      coreBlocks: { used: 3, limit: 10_000 },
      coreBlockBytes: { used: bytes("Bo: café"), limit: 64 * 1024 ** 2 },
      queuedJobs: { used: 1, limit: 100 },
    });
    // Asked for one identity, the status still keeps the tenant's usage to itself.
    assert.equal((await service.status(tenant, { userId: "bo" })).quotas, undefined);
  });
}

/** The migration fills the counter from the rows stored before it; later writes and recounts agree. */
async function checkMigration(subject: MetadataSubject) {
  const tenant = "old";
  const before = await withService(subject, Number.POSITIVE_INFINITY, async (service, store) => {
    const scope = { userId: "cy" };
    const memory = await service.add(tenant, { ...scope, content: "Cy drinks mate", metadata: { a: 1 } });
    await service.updateMemory(tenant, memory.memory.id, { metadata: { a: 2, tags: ["x", "ñ"] } });
    await service.writeEvent(tenant, {
      ...scope,
      sessionId: "s",
      role: "user",
      content: "olá",
      metadata: { speaker: "Cy" },
      infer: false,
    });
    await service.ingestDocument(tenant, { ...scope, title: "doc", content: "text", metadata: { k: "v" } });
    await service.add(tenant, { userId: "dee", content: "Dee swims", metadata: { b: true } });
    return store.usage(tenant);
  });
  assert.equal(before.metadataBytes, await metadataFromRows(subject, tenant));
  await subject.before0556();
  // What the rows' metadata was stored as: SQLite keeps the JSON text written, PostgreSQL its JSONB text.
  // The event's episode's is the service's own: the migrations after (ADR 0563) charge it nothing.
  const callers = "AND memory_id NOT IN (SELECT id FROM memory_memories WHERE kind = 'episode')";
  const stored = async () =>
    (
      await Promise.all(
        [
          `memory_history WHERE tenant_id = ? ${callers}`,
          "memory_events WHERE tenant_id = ?",
          "memory_documents WHERE tenant_id = ?",
        ].map((from) => subject.rows(`SELECT metadata FROM ${from}`, [tenant])),
      )
    )
      .flat()
      .reduce(
        (sum, { metadata }) =>
          sum + bytes(typeof metadata === "string" ? metadata : JSON.stringify(metadata)),
        0,
      );
  const postgres = subject.name === "PostgreSQL";
  const textBytes = postgres
    ? Number(
        (
          await subject.rows(
            `SELECT (SELECT coalesce(sum(octet_length(metadata::text)), 0) FROM memory_history WHERE tenant_id = ? ${callers})
              + (SELECT coalesce(sum(octet_length(metadata::text)), 0) FROM memory_events WHERE tenant_id = ?)
              + (SELECT coalesce(sum(octet_length(metadata::text)), 0) FROM memory_documents WHERE tenant_id = ?) AS n`,
            [tenant, tenant, tenant],
          )
        )[0]!.n,
      )
    : await stored();
  await withService(subject, Number.POSITIVE_INFINITY, async (service, store) => {
    const migrated = await store.usage(tenant);
    assert.deepEqual(migrated, { ...before, metadataBytes: textBytes });
    // PostgreSQL's JSONB text spaces keys and values: rows stored before are counted as it keeps them.
    if (postgres) assert.ok(textBytes > before.metadataBytes, `${textBytes} > ${before.metadataBytes}`);
    else assert.equal(textBytes, before.metadataBytes);
    // A write after it is charged its JSON text; a purge's recount agrees with every charge.
    await service.add(tenant, { userId: "cy", content: "Cy cycles", metadata: { c: "d" } });
    const charged = textBytes + bytes('{"c":"d"}');
    assert.equal((await store.usage(tenant)).metadataBytes, charged);
    await service.purge(tenant, { userId: "dee" });
    assert.equal(
      (await store.usage(tenant)).metadataBytes,
      charged - bytes(postgres ? '{"b": true}' : '{"b":true}'),
    );
  });
}

/** Rows stored when `{}` was charged 2 bytes are counted again by the migration that made it free. */
async function checkEmptyMigration(subject: MetadataSubject) {
  const tenant = "empty";
  const scope = { userId: "eve" };
  let plain = "";
  const before = await withService(subject, Number.POSITIVE_INFINITY, async (service, store) => {
    plain = (await service.add(tenant, { ...scope, content: "Eve rows" })).memory.id;
    await service.writeEvent(tenant, {
      ...scope,
      sessionId: "s",
      role: "user",
      content: "hey",
      infer: false,
    });
    await service.ingestDocument(tenant, { ...scope, title: "Log", content: "a log page", metadata: {} });
    await service.add(tenant, { ...scope, content: "Eve sails", metadata: { a: 1 } });
    return (await store.usage(tenant)).metadataBytes;
  });
  assert.equal(before, await metadataFromRows(subject, tenant));
  await subject.before0559();
  const [drifted] = await subject.rows(
    "SELECT metadata_bytes AS n FROM memory_tenant_usage WHERE tenant_id = ?",
    [tenant],
  );
  // The first memory's version, the event and the document hold `{}`: 2 bytes each, charged before.
  assert.equal(Number(drifted!.n), before + 6);
  await withService(subject, Number.POSITIVE_INFINITY, async (service, store) => {
    assert.equal((await store.usage(tenant)).metadataBytes, before, "counted again, `{}` free");
    assert.equal(await metadataFromRows(subject, tenant), before);
    // A memory kept from before versions were kept has no history row: its own `{}` is free too.
    await subject.rows("DELETE FROM memory_history WHERE tenant_id = ? AND memory_id = ?", [tenant, plain]);
    await service.purge(tenant, { userId: "nobody" });
    assert.equal((await store.usage(tenant)).metadataBytes, before, "a purge's recount");
    await service.purge(tenant, { userId: "eve" });
    assert.equal((await store.usage(tenant)).metadataBytes, 0);
  });
}

/**
 * Rows stored when the service's own metadata was charged are counted again by the migration that
 * made it free (ADR 0563): episodes' versions keeping it and imports' events; later changes keep it free.
 */
async function checkServicesOwnMigration(subject: MetadataSubject) {
  const tenant = "owned";
  const scope = { userId: "fay", sessionId: "s" };
  const before = await withService(subject, Number.POSITIVE_INFINITY, async (service, store) => {
    await service.add(tenant, { userId: "fay", content: "Fay paints", metadata: { a: 1 } });
    await service.writeEvent(tenant, { ...scope, role: "user", content: "I paint at dawn", infer: false });
    await service.writeEvent(tenant, {
      ...scope,
      role: "assistant",
      content: "Lovely light then",
      metadata: { speaker: "Guide" },
      infer: false,
    });
    const { memories } = await service.listMemories(tenant, { ...scope, kind: "episode", limit: 10 });
    await service.updateMemory(tenant, memories[0]!.id, { content: "I paint at dusk" });
    await service.deleteMemory(tenant, memories[1]!.id, { reason: "said twice" });
    assert.equal((await importTurns(service, tenant, "fay", 4)).status, "succeeded");
    return (await store.usage(tenant)).metadataBytes;
  });
  assert.equal(before, bytes('{"a":1}') + bytes('{"speaker":"Guide"}'));
  assert.equal(before, await metadataFromRows(subject, tenant));
  await subject.before0563();
  const [drifted] = await subject.rows(
    "SELECT metadata_bytes AS n FROM memory_tenant_usage WHERE tenant_id = ?",
    [tenant],
  );
  assert.ok(Number(drifted!.n) > before + 200, `charged before: ${drifted!.n}`);
  await withService(subject, Number.POSITIVE_INFINITY, async (service, store) => {
    assert.equal((await store.usage(tenant)).metadataBytes, before, "counted again, the service's own free");
    assert.equal(await metadataFromRows(subject, tenant), before);
    // A change keeping an episode's metadata after the migration keeps its charge: none.
    const { memories } = await service.listMemories(tenant, { ...scope, kind: "episode", limit: 10 });
    for (const memory of memories) await service.updateMemory(tenant, memory.id, { importance: 0.9 });
    assert.equal((await store.usage(tenant)).metadataBytes, before);
    await service.purge(tenant, { userId: "nobody" });
    assert.equal((await store.usage(tenant)).metadataBytes, before, "a purge's recount");
  });
}

for (const make of makers) {
  describe("metadata quota", () => {
    it("refuses metadata past the tenant's bytes exactly at the bound, stores nothing, purge gives room", async () => {
      const subject = await make();
      subjects.push(subject);
      await checkBounds(subject);
    });
    it("charges only what callers send: events without metadata, captures and imports at the limit", async () => {
      const subject = await make();
      subjects.push(subject);
      await checkServicesOwn(subject);
    });
    it("the migration that makes the service's own metadata free counts the rows charged for it again", async () => {
      const subject = await make();
      subjects.push(subject);
      await checkServicesOwnMigration(subject);
    });
    it("status answers every quota kind: the counters and what the tenant holds", async () => {
      const subject = await make();
      subjects.push(subject);
      await checkStatus(subject);
    });
    it("the migration counts the metadata of rows stored before it", async () => {
      const subject = await make();
      subjects.push(subject);
      await checkMigration(subject);
    });
    it("the migration that makes empty metadata free counts the rows charged for it again", async () => {
      const subject = await make();
      subjects.push(subject);
      await checkEmptyMigration(subject);
    });
  });
}
