/**
 * API keys bound to one identity (ADR 0357), over real HTTP on SQLite and PostgreSQL. Alice's key is
 * bound to `userId: "alice"` in a tenant that Bob (his own bound key) and an unbound key share. The
 * attacker's walk: with Alice's key, every route the app registers is called as Alice, naming Bob, and
 * at Bob's ids, on a service where Bob is busy and on one where he never came. Every answer must be the
 * same on both (ids and times aside), so nothing of Bob's is read, listed, counted, searched or
 * inferred; naming Bob is refused `403 scope_forbidden`, Bob's ids answer as missing ones, and Bob's
 * rows in the store are the same after the walk as before it. A route with no entry here fails.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { MemoryClient, type MemoryStore } from "@tackle/memory";
import { MEMORY_STATUSES } from "@tackle/memory/schemas";
import {
  createMemoryApp,
  type MemoryServer,
  memoryRoutes,
  openMemoryStore,
  parseApiKeys,
  serveMemory,
} from "@tackle/memory/server";
import { createTestDatabase, type TestDatabase, underLoadMs } from "@tackle/test-support";

/** The TACKLE_MEMORY_API_KEYS format, bound keys and all. */
const keys = parseApiKeys(
  "key-any=acme, key-alice=acme?userId=alice, key-bob=acme?userId=bob, key-travel=acme?userId=alice&agentId=travel",
);
const directory = mkdtempSync(join(tmpdir(), "tackle-memory-bound-"));
after(() => rmSync(directory, { recursive: true, force: true }));

interface Service {
  server?: MemoryServer;
  store?: MemoryStore;
  alice?: MemoryClient;
  /** Alice's own ids, seeded alike on both services. */
  own: Record<"memory" | "deleted" | "procedure" | "job" | "trace", string>;
}
const services: Record<"busy" | "quiet", Service> = {
  busy: { own: {} as Service["own"] },
  quiet: { own: {} as Service["own"] },
};
/** Bob's ids on the busy service (on the quiet one they name nothing). */
const bob = {} as Record<"memory" | "deleted" | "procedure" | "job" | "trace", string>;
const bobMarker = "BOBSECRET";

function client(server: MemoryServer, apiKey: string) {
  return new MemoryClient({ baseUrl: server.url, apiKey, allowPrivateNetwork: true });
}

/** Alice's data, the same on both services; her client sends no userId: the key supplies it. */
async function seedAlice(service: Service) {
  const alice = service.alice!;
  service.own.memory = (await alice.add({ content: "I keep a violin in the garden shed" })).memory.id;
  service.own.deleted = (await alice.add({ content: "My favourite tea is a smoky lapsang" })).memory.id;
  service.own.procedure = (
    await alice.add({ kind: "procedure", content: "Water the garden before nine" })
  ).memory.id;
  await alice.writeEvent({ sessionId: "s1", role: "user", content: "I prefer green tea in the morning" });
  await alice.ingestDocument({ title: "Garden handbook", content: "Sheds in the garden need oil." });
  await alice.selfEdit({ edits: [{ op: "append", label: "human", text: "Plays the violin." }] });
  service.own.trace = (await alice.search({ query: "garden violin" })).traceId;
  const imported = await alice.importConversations({
    format: "openai",
    conversations: [{ sessionId: "s2", messages: [{ role: "user", content: "I like lemon cake" }] }],
  });
  service.own.job = imported.job.id;
  await alice.waitForJob(imported.job.id, { timeoutMs: underLoadMs(20_000) });
}

/** Bob, on the busy service: the same session names and words as Alice, and more of everything. */
async function seedBob(server: MemoryServer) {
  const b = client(server, "key-bob");
  for (let index = 0; index < 6; index += 1) {
    const { memory } = await b.add(
      { content: `${bobMarker} ${index}: the garden shed holds tea and a violin` },
      // Alice's walk sends the same idempotency keys: hers must not meet his.
      { idempotencyKey: index === 0 ? "walk-add" : `bob-${index}` },
    );
    await b.recordFeedback(memory.id, { rating: "helpful" });
    if (index === 0) bob.memory = memory.id;
    if (index === 1) bob.deleted = memory.id;
  }
  bob.procedure = (
    await b.add({ kind: "procedure", content: `${bobMarker} water the garden before nine` })
  ).memory.id;
  for (let index = 0; index < 3; index += 1) {
    await b.writeEvent({ sessionId: "s1", role: "user", content: `${bobMarker} garden tea ${index}` });
  }
  await b.ingestDocument({ title: "Garden handbook", content: "Sheds in the garden need oil." });
  await b.ingestDocument({ title: `${bobMarker} notes`, content: `${bobMarker} tea and garden sheds.` });
  await b.selfEdit({ edits: [{ op: "append", label: "human", text: `${bobMarker} plays the violin.` }] });
  bob.trace = (await b.search({ query: "garden violin tea" })).traceId;
  const imported = await b.importConversations({
    format: "openai",
    conversations: [{ sessionId: "s2", messages: [{ role: "user", content: "I like lemon cake" }] }],
  });
  bob.job = imported.job.id;
  await b.waitForJob(imported.job.id, { timeoutMs: underLoadMs(20_000) });
  // The unbound key's tenant-wide memory (no userId) lies outside Alice's scope as well.
  await client(server, "key-any").add({ content: `${bobMarker} tenant-wide: the shed key is under the mat` });
}

type Target = "memory" | "deleted" | "procedure" | "job" | "trace";
/**
 * How Alice calls each route: `body`/`query` as herself (her key fills in userId), `id` for a route on
 * one record (hers, then Bob's of the same kind); `admin` routes span the tenant and are refused.
 */
const walk: Record<string, { body?: object; query?: Record<string, string>; id?: Target } | { admin: true }> =
  {
    search: { body: { query: "garden shed violin tea", limit: 20 } },
    add: { body: { content: "The garden shed holds tea and a violin" } },
    addBatch: { body: { memories: [{ content: "Lemon cake on Sundays" }] } },
    listMemories: { query: { limit: "200" } },
    getMemory: { id: "memory" },
    updateMemory: { id: "memory", body: { content: "I keep a cello in the garden shed" } },
    deleteMemory: { id: "deleted", query: { reason: "walk" } },
    memoryHistory: { id: "memory" },
    chainTrace: { id: "memory" },
    recordProcedureOutcome: { id: "procedure", body: { success: true } },
    recordFeedback: { id: "memory", body: { rating: "unhelpful" } },
    writeEvent: { body: { sessionId: "s1", role: "assistant", content: "Noted: green tea." } },
    recallConversation: { body: { sessionId: "s1", limit: 200 } },
    ingestDocument: { body: { title: "Tea notes", content: "Tea and gardens and violins." } },
    searchKnowledge: { body: { query: "garden shed oil notes", limit: 20 } },
    selfEdit: { body: { edits: [] } },
    profile: { body: {} },
    contextBundle: { body: { query: "garden tea violin" } },
    unifiedState: { body: {} },
    status: {},
    noveltyScan: { body: { candidates: ["the garden shed holds tea and a violin", "Bob plays the violin"] } },
    consolidate: { body: {} },
    importConversations: {
      body: {
        format: "openai",
        conversations: [{ sessionId: "s3", messages: [{ role: "user", content: "I like plum tart" }] }],
      },
    },
    listJobs: { query: { limit: "200" } },
    getJob: { id: "job" },
    accessTrends: { admin: true },
    accessSummaries: { admin: true },
    purge: { admin: true },
    listTraces: { query: { limit: "200" } },
    getTrace: { id: "trace" },
  };

interface Answer {
  status: number;
  body: { error?: { code?: string } } & Record<string, unknown>;
}

interface Request {
  id?: string;
  body?: object;
  query?: Record<string, string>;
}

/** Requests of one walk, counted so both services' walks send the same idempotency keys. */
let sent = 0;

async function send(
  service: Service,
  route: (typeof memoryRoutes)[number],
  request: Request,
  idempotencyKey = `walk-${route.operationId}-${sent}`,
): Promise<Answer> {
  sent += 1;
  const url = new URL(service.server!.url + route.path.replace("{id}", request.id ?? ""));
  for (const [key, value] of Object.entries(request.query ?? {})) url.searchParams.set(key, value);
  const response = await fetch(url, {
    method: route.method.toUpperCase(),
    headers: {
      authorization: "Bearer key-alice",
      "content-type": "application/json",
      ...(route.write ? { "idempotency-key": idempotencyKey } : {}),
    },
    ...(request.body ? { body: JSON.stringify(request.body) } : {}),
  });
  return { status: response.status, body: (await response.json()) as Answer["body"] };
}

/** Ids become their order of appearance; times, durations and fractions' noise go. */
function normalize(value: unknown): unknown {
  const ids = new Map<string, string>();
  const text = JSON.stringify(value, (key, entry) => {
    if (["uptimeSeconds", "tookMs", "durationMs", "latencyMs", "ms"].includes(key)) return undefined;
    if (typeof entry === "number" && !Number.isInteger(entry)) return Math.round(entry * 100) / 100;
    if (typeof entry === "string" && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/.test(entry)) return "<time>";
    return entry;
  }).replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, (id) => {
    if (!ids.has(id)) ids.set(id, `<id${ids.size}>`);
    return ids.get(id)!;
  });
  return JSON.parse(text);
}

/** Every answer of Alice's walk on one service, in order. */
async function walkAsAlice(name: "busy" | "quiet"): Promise<unknown[]> {
  const service = services[name];
  const answers: unknown[] = [];
  sent = 0;
  /** `askedFor`: an id Alice sent herself, which a refusal may repeat. */
  const expect = (answer: Answer, status: number, what: string, askedFor?: string) => {
    const text = JSON.stringify(answer.body);
    assert.equal(answer.status, status, `${name} ${what}: ${text.slice(0, 300)}`);
    assert.ok(!text.includes(bobMarker), `${name} ${what} answered Bob's text`);
    for (const id of Object.values(bob)) {
      if (id !== askedFor) assert.ok(!text.includes(id), `${name} ${what} answered Bob's id ${id}`);
    }
    answers.push({ what, answer });
  };
  const refused = (answer: Answer, what: string) => {
    expect(answer, 403, what);
    assert.equal(answer.body.error?.code, "scope_forbidden", what);
  };
  for (const route of memoryRoutes) {
    const entry = walk[route.operationId]!;
    const op = route.operationId;
    if ("admin" in entry) {
      refused(await send(service, route, { body: {} }), `${op} (admin)`);
      refused(await send(service, route, { body: { userId: "alice" } }), `${op} (admin, as herself)`);
      continue;
    }
    const { id: target, body, query } = entry;
    // A body of several shapes (the import's, one per format) takes the scope in each of them.
    const takesUserId = (schema: unknown): boolean => {
      const { shape, options } = (schema ?? {}) as { shape?: object; options?: unknown[] };
      return Array.isArray(options) ? options.every(takesUserId) : shape !== undefined && "userId" in shape;
    };
    const scopeIn = (["body", "query"] as const).find((part) => takesUserId(route[part]));
    const as = (scope: Record<string, string>, id?: string): Request => ({
      ...(id ? { id } : {}),
      ...(route.body ? { body: { ...body, ...(scopeIn === "body" ? scope : {}) } } : {}),
      query: { ...query, ...(scopeIn === "query" ? scope : {}) },
    });
    if (scopeIn) {
      // Naming Bob is refused (on her own id too); naming herself is as naming no one.
      refused(
        await send(service, route, as({ userId: "bob" }, target && service.own[target])),
        `${op} naming Bob`,
      );
      const herself = await send(service, route, as({ userId: "alice" }, target && service.own[target]));
      expect(herself, route.status, `${op} naming herself`);
    } else {
      assert.ok(route.scopeFromKey, `${op} takes no identity fields and does not read the key's`);
    }
    if (target) {
      // Bob's id, and an id that never existed: the same refusal, so no existence oracle.
      const theirs = await send(service, route, as({}, bob[target]));
      expect(theirs, 404, `${op} at Bob's ${target}`, bob[target]);
      const missing = randomUUID();
      const none = await send(service, route, as({}, missing));
      assert.deepEqual(
        JSON.parse(JSON.stringify(theirs).replaceAll(bob[target], "<x>")),
        JSON.parse(JSON.stringify(none).replaceAll(missing, "<x>")),
        `${op}: Bob's id answers unlike a missing one`,
      );
    }
    // Bob sent his first add under "walk-add": Alice's key of the same name is her own.
    const own = await send(
      service,
      route,
      as({}, target && service.own[target]),
      op === "add" ? "walk-add" : undefined,
    );
    expect(own, route.status, op);
    const job = (own.body as { job?: { id: string } }).job;
    if (route.status === 202 && job)
      await service.alice!.waitForJob(job.id, { timeoutMs: underLoadMs(20_000) });
  }
  return answers;
}

/** Everything of Bob's in the store, read beside the service (reads through it would count accesses). */
async function bobsRows() {
  const store = services.busy.store!;
  const scope = { userId: "bob" };
  const memories = await store.listMemories("acme", scope, {
    statuses: [...MEMORY_STATUSES],
    limit: 1000,
    order: "recent",
  });
  return {
    memories,
    histories: await Promise.all(memories.map((memory) => store.memoryHistory("acme", memory.id))),
    events: await store.listEvents("acme", scope, { order: "asc", limit: 1000 }),
    blocks: await store.getBlocks("acme", scope),
    jobs: await store.listJobs("acme", scope, { limit: 200 }),
    traces: await store.listTraces("acme", scope, { limit: 200 }),
    counts: await store.counts("acme", scope),
  };
}

async function routesAreWalked() {
  const app = createMemoryApp({ service: services.busy.server!.service, apiKeys: keys });
  const known = new Set(
    memoryRoutes.map((route) => `${route.method.toUpperCase()} ${route.path.replace("{id}", ":id")}`),
  );
  const registered = [
    ...new Set(app.routes.filter((route) => route.method !== "ALL").map((r) => `${r.method} ${r.path}`)),
  ];
  assert.deepEqual(
    registered.filter((route) => !known.has(route) && !["GET /health", "GET /openapi.json"].includes(route)),
    [],
    "a route outside memoryRoutes escapes the bound-key walk",
  );
  assert.deepEqual(
    memoryRoutes.map((route) => route.operationId).filter((id) => !(id in walk)),
    [],
    "every route has an entry in the bound-key walk",
  );
}

for (const kind of ["SQLite", "PostgreSQL"] as const) {
  describe(`on ${kind}`, () => {
    const databases: TestDatabase[] = [];
    let bobBefore: Awaited<ReturnType<typeof bobsRows>>;
    before(async () => {
      for (const [name, service] of Object.entries(services)) {
        let location = join(directory, `${kind}-${name}.db`);
        if (kind === "PostgreSQL") {
          const database = await createTestDatabase("tackle_memory_bound");
          databases.push(database);
          location = database.url;
        }
        service.store = await openMemoryStore(location);
        service.server = await serveMemory({ store: service.store, apiKeys: keys, port: 0 });
        service.alice = client(service.server, "key-alice");
      }
      await seedBob(services.busy.server!);
      await seedAlice(services.busy);
      await seedAlice(services.quiet);
      bobBefore = await bobsRows();
    });
    after(async () => {
      for (const service of Object.values(services)) {
        await service.server?.close();
        delete service.server;
        await service.store?.close().catch(() => {});
        delete service.store;
      }
      for (const database of databases.splice(0)) await database.drop();
    });

    test("every route the app registers has an entry in the bound-key walk", routesAreWalked);

    test("Alice's bound key answers the same whether or not Bob is busy in her tenant; naming Bob is refused; his ids answer as missing ones", async () => {
      const busy = await walkAsAlice("busy");
      const quiet = await walkAsAlice("quiet");
      assert.ok(busy.length >= 60, `only ${busy.length} answers compared`);
      assert.deepEqual(normalize(busy), normalize(quiet));
    });

    test("Bob's rows are unchanged by Alice's walk", async () => {
      assert.ok(bobBefore.memories.length >= 7 && bobBefore.events.length >= 3 && bobBefore.jobs.length >= 1);
      assert.deepEqual(await bobsRows(), bobBefore);
    });

    test("an unbound key still sees both; Bob's own key sees his; the counts of status are the key's scope", async () => {
      const server = services.busy.server!;
      const any = client(server, "key-any");
      const found = await any.search({ wholeTenant: true, query: "garden shed violin tea", limit: 100 });
      const owners = new Set(found.results.map((result) => result.memory.userId));
      assert.ok(owners.has("alice") && owners.has("bob"), [...owners].join());
      assert.ok((await any.search({ userId: "bob", query: "garden" })).results.length > 0);
      const trends = await any.accessTrends({ userId: "bob", days: 7 });
      assert.ok(trends.days.some((day) => day.searches > 0));
      const bobs = await client(server, "key-bob").search({ query: "garden violin" });
      assert.ok(bobs.results.some((result) => result.memory.content.includes(bobMarker)));
      const tenant = await any.status();
      const alice = await services.busy.alice!.status();
      const quietAlice = await services.quiet.alice!.status();
      assert.deepEqual(alice.counts, quietAlice.counts);
      assert.ok(tenant.counts.memories > alice.counts.memories);
      assert.ok(tenant.counts.events > alice.counts.events);
    });
  });
}

test("a key bound to a user and an agent acts only as both", async () => {
  const server = await serveMemory({ store: join(directory, "agent.db"), apiKeys: keys, port: 0 });
  try {
    const travel = client(server, "key-travel");
    const alice = client(server, "key-alice");
    await alice.add({ content: "Alice's passport expires in May" });
    const { memory } = await travel.add({ content: "Alice prefers aisle seats on flights" });
    assert.deepEqual([memory.userId, memory.agentId], ["alice", "travel"]);
    await assert.rejects(travel.search({ agentId: "shopping", query: "passport" }), /own agentId/);
    await assert.rejects(travel.search({ userId: "bob", query: "passport" }), /own userId/);
    // The agent's key sees only the agent's memories of Alice; Alice's key sees all of hers.
    const byAgent = (await travel.search({ query: "passport seats flights" })).results;
    assert.deepEqual(
      byAgent.map((result) => result.memory.content),
      ["Alice prefers aisle seats on flights"],
    );
    assert.equal((await alice.search({ query: "passport seats flights" })).results.length, 2);
  } finally {
    await server.close();
  }
});

test("bound keys are configured as key=tenant?userId=…&agentId=…; anything else bound is refused", () => {
  assert.deepEqual(parseApiKeys("# keys, one a line\nk1=t1,k2=t2?userId=alice&agentId=travel\nk3==t3"), {
    k1: "t1",
    k2: { tenant: "t2", userId: "alice", agentId: "travel" },
    "k3=": "t3",
  });
  assert.throws(() => parseApiKeys("k=t?sessionId=s1"), /bound to userId and agentId, not "sessionId"/);
  assert.throws(() => parseApiKeys("k=t?userId="), /userId must be 1 to 200/);
  assert.throws(() => parseApiKeys("k=t?"), /binds an identity/);
  assert.throws(() => parseApiKeys("k=t?userId=a&userId=b"), /binds userId twice/);
});
