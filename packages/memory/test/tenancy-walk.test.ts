/**
 * Tenant isolation of the HTTP API by difference, over every route the app registers: two services,
 * one where tenant B is busy (the same user and session names, the same words, its own imports,
 * consolidations, searches and feedback) and one where B never came. Tenant A does the same things on
 * both, then reads every route: each answer must be the same on both services (ids and times aside),
 * so nothing of B's can be read, listed, counted, ranked against or inferred. A route the app answers
 * that has no entry here fails the test, and so does one answered without an API key. On SQLite and
 * on PostgreSQL (whose search and statistics are their own).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { MemoryClient } from "@tackle/memory";
import { createMemoryApp, type MemoryServer, memoryRoutes, serveMemory } from "@tackle/memory/server";
import { createTestDatabase, type TestDatabase, underLoadMs } from "@tackle/test-support";

const keys = { "key-a": "tenant-a", "key-b": "tenant-b" };
const directory = mkdtempSync(join(tmpdir(), "tackle-memory-walk-"));
/** `busy`: B works here too. `quiet`: only A. */
const services: Record<"busy" | "quiet", { server?: MemoryServer; a?: MemoryClient; firstMemory?: string }> =
  {
    busy: {},
    quiet: {},
  };
const scope = { userId: "u1" };

async function seedA(a: MemoryClient): Promise<string> {
  const { memory } = await a.add({ ...scope, content: "I keep a violin in the garden shed" });
  await a.add({ ...scope, content: "My favourite tea is a smoky lapsang" });
  await a.add({ ...scope, kind: "procedure", content: "Water the garden before nine" });
  await a.writeEvent({
    ...scope,
    sessionId: "s1",
    role: "user",
    content: "I prefer green tea in the morning",
  });
  await a.writeEvent({ ...scope, sessionId: "s1", role: "assistant", content: "Noted: green tea." });
  await a.ingestDocument({ ...scope, title: "Garden handbook", content: "Sheds in the garden need oil." });
  await a.selfEdit({ ...scope, edits: [{ op: "append", label: "human", text: "Plays the violin." }] });
  await a.search({ ...scope, query: "garden violin" });
  await a.searchKnowledge({ ...scope, query: "garden shed" });
  await a.recordFeedback(memory.id, { rating: "helpful" }, { scope });
  const imported = await a.importConversations({
    ...scope,
    format: "openai",
    conversations: [{ sessionId: "s2", messages: [{ role: "user", content: "I like lemon cake" }] }],
  });
  await a.waitForJob(imported.job.id, { timeoutMs: underLoadMs(20_000), scope });
  const consolidated = await a.consolidate({ ...scope });
  await a.waitForJob(consolidated.job.id, { timeoutMs: underLoadMs(20_000), scope });
  return memory.id;
}

/** B, on the busy service: the same names and words as A, and more of everything. */
async function seedB(b: MemoryClient) {
  for (let index = 0; index < 12; index += 1) {
    const { memory } = await b.add({
      ...scope,
      content: `B fact ${index}: the garden shed holds tea and a violin`,
    });
    await b.recordFeedback(memory.id, { rating: index % 2 === 0 ? "helpful" : "unhelpful" }, { scope });
    await b.getMemory(memory.id, { scope });
  }
  for (let index = 0; index < 6; index += 1) {
    await b.writeEvent({ ...scope, sessionId: "s1", role: "user", content: `B says garden tea ${index}` });
  }
  await b.ingestDocument({ ...scope, title: "Garden handbook", content: "Sheds in the garden need oil." });
  await b.ingestDocument({
    ...scope,
    title: "B tea notes",
    content: "Tea and gardens and violins and sheds.",
  });
  await b.selfEdit({ ...scope, edits: [{ op: "append", label: "human", text: "B plays the violin too." }] });
  for (const query of ["garden", "violin", "tea shed"]) await b.search({ ...scope, query });
  await b.searchKnowledge({ ...scope, query: "garden shed" });
  const imported = await b.importConversations({
    ...scope,
    format: "openai",
    conversations: [{ sessionId: "s2", messages: [{ role: "user", content: "I like lemon cake" }] }],
  });
  await b.waitForJob(imported.job.id, { timeoutMs: underLoadMs(20_000), scope });
  const consolidated = await b.consolidate({ ...scope });
  await b.waitForJob(consolidated.job.id, { timeoutMs: underLoadMs(20_000), scope });
}

async function openServices(kind: "SQLite" | "PostgreSQL", databases: TestDatabase[]) {
  for (const [name, entry] of Object.entries(services)) {
    let store = join(directory, `${name}.db`);
    if (kind === "PostgreSQL") {
      const database = await createTestDatabase("tackle_memory_walk");
      databases.push(database);
      store = database.url;
    }
    entry.server = await serveMemory({ store, apiKeys: keys, port: 0 });
    entry.a = new MemoryClient({ baseUrl: entry.server.url, apiKey: "key-a", allowPrivateNetwork: true });
  }
  const b = new MemoryClient({
    baseUrl: services.busy.server!.url,
    apiKey: "key-b",
    allowPrivateNetwork: true,
  });
  // B before, between and after A's writes on the busy service.
  await seedB(b);
  services.busy.firstMemory = await seedA(services.busy.a!);
  services.quiet.firstMemory = await seedA(services.quiet.a!);
  await seedB(b);
}

after(() => rmSync(directory, { recursive: true, force: true }));

/**
 * How A reads each route (`read`), or why a route is not read here (`write`: it changes A's own data;
 * the identity property test sends it at the other tenant's ids).
 */
const walk: Record<string, { read: unknown } | { write: string }> = {
  search: { read: { ...scope, query: "garden shed violin tea", limit: 20 } },
  add: { write: "adds" },
  addBatch: { write: "adds" },
  listMemories: { read: { ...scope, limit: 200 } },
  getMemory: { read: undefined },
  updateMemory: { write: "versions" },
  deleteMemory: { write: "deletes" },
  memoryHistory: { read: undefined },
  chainTrace: { read: undefined },
  recordProcedureOutcome: { write: "counts an outcome" },
  recordFeedback: { write: "counts feedback" },
  writeEvent: { write: "appends" },
  recallConversation: { read: { ...scope, sessionId: "s1", limit: 200 } },
  ingestDocument: { write: "ingests" },
  searchKnowledge: { read: { ...scope, query: "garden shed oil", limit: 20 } },
  selfEdit: { read: { ...scope, edits: [] } },
  profile: { read: scope },
  contextBundle: { read: { ...scope, query: "garden tea" } },
  unifiedState: { read: scope },
  status: { read: undefined },
  noveltyScan: {
    read: { ...scope, candidates: ["the garden shed holds tea and a violin", "I keep a violin"] },
  },
  consolidate: { write: "starts a job" },
  importConversations: { write: "starts a job" },
  listJobs: { read: { limit: 200 } },
  getJob: { write: "read through listJobs (job ids differ per service)" },
  accessTrends: { read: { ...scope, days: 7 } },
  accessSummaries: { read: { ...scope, limit: 100 } },
  purge: { write: "deletes a scope (test/purge.test.ts)" },
  listTraces: { read: { limit: 200 } },
  getTrace: { write: "read through listTraces (trace ids differ per service)" },
};

/** Ids become their order of appearance, times and durations go, fractions are rounded. */
function normalize(value: unknown): unknown {
  const ids = new Map<string, string>();
  const text = JSON.stringify(value, (key, entry) => {
    if (["uptimeSeconds", "tookMs", "durationMs", "latencyMs", "ms"].includes(key)) return undefined;
    if (typeof entry === "number" && !Number.isInteger(entry)) return Math.round(entry * 100) / 100;
    if (typeof entry === "string" && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/.test(entry)) return "<time>";
    if (typeof entry === "string" && /^\d{4}-\d{2}-\d{2}$/.test(entry)) return "<day>";
    return entry;
  }).replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, (id) => {
    if (!ids.has(id)) ids.set(id, `<id${ids.size}>`);
    return ids.get(id)!;
  });
  return JSON.parse(text);
}

async function read(service: "busy" | "quiet", route: (typeof memoryRoutes)[number], body: unknown) {
  const entry = services[service];
  const url = new URL(entry.server!.url + route.path.replace("{id}", entry.firstMemory!));
  if (route.method === "get" || route.path.includes("{id}")) {
    for (const [key, value] of Object.entries(route.path.includes("{id}") ? scope : ((body as object) ?? {})))
      url.searchParams.set(key, String(value));
  }
  const response = await fetch(url, {
    method: route.method.toUpperCase(),
    headers: { authorization: "Bearer key-a", "content-type": "application/json" },
    ...(route.method === "get" ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: await response.json() };
}

async function routesNeedKeys() {
  const app = createMemoryApp({ service: services.busy.server!.service, apiKeys: keys });
  const registered = [
    ...new Set(
      app.routes.filter((route) => route.method !== "ALL").map((route) => `${route.method} ${route.path}`),
    ),
  ].sort();
  const known = new Set(
    memoryRoutes.map((route) => `${route.method.toUpperCase()} ${route.path.replace("{id}", ":id")}`),
  );
  const publicRoutes = ["GET /health", "GET /openapi.json"];
  assert.deepEqual(
    registered.filter((route) => !known.has(route) && !publicRoutes.includes(route)),
    [],
    "a route outside memoryRoutes escapes the identity and tenancy walks",
  );
  assert.deepEqual(
    memoryRoutes.map((route) => route.operationId).filter((id) => !(id in walk)),
    [],
    "every route has an entry in the walk",
  );
  for (const route of registered) {
    const [method, path] = route.split(" ") as [string, string];
    const response = await fetch(
      services.busy.server!.url + path.replace(":id", services.busy.firstMemory!),
      {
        method,
        headers: { "content-type": "application/json" },
        ...(method === "GET" ? {} : { body: "{}" }),
      },
    );
    const answer = await response.text();
    if (publicRoutes.includes(route)) {
      assert.equal(response.status, 200, route);
      assert.ok(
        !/tenant-|violin|garden/.test(answer),
        `${route} answers tenant data: ${answer.slice(0, 200)}`,
      );
    } else {
      assert.equal(response.status, 401, `${route} without a key: ${answer}`);
    }
  }
}

async function readsAlike() {
  let compared = 0;
  for (const route of memoryRoutes) {
    const entry = walk[route.operationId]!;
    if (!("read" in entry)) continue;
    const busy = await read("busy", route, entry.read);
    const quiet = await read("quiet", route, entry.read);
    assert.equal(busy.status, 200, `${route.operationId}: ${JSON.stringify(busy.body)}`);
    assert.equal(quiet.status, 200, `${route.operationId}: ${JSON.stringify(quiet.body)}`);
    assert.ok(!JSON.stringify(busy.body).includes("B "), `${route.operationId} answered B's text`);
    assert.deepEqual(normalize(busy.body), normalize(quiet.body), `${route.operationId} differs with B busy`);
    compared += 1;
  }
  assert.ok(compared >= 16, `only ${compared} routes compared`);
}

async function recallCursors() {
  // Events once answered their place in the store (seq) and paged by it: its gaps counted every
  // tenant's events, so a busy tenant B showed in tenant A's answers.
  const pages: Record<string, unknown[]> = { busy: [], quiet: [] };
  for (const service of ["busy", "quiet"] as const) {
    const a = services[service].a!;
    let cursor: string | undefined;
    do {
      const page = await a.recallConversation({
        ...scope,
        sessionId: "s1",
        limit: 1,
        order: "asc",
        ...(cursor ? { cursor } : {}),
      });
      assert.ok(
        page.events.every((event) => !("seq" in event)),
        "no store position is answered",
      );
      assert.ok(cursor === undefined || !/^\d+$/.test(cursor), `cursor ${cursor} is a store position`);
      pages[service]!.push(page);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  }
  assert.equal(pages.busy!.length, 2);
  assert.deepEqual(normalize(pages.busy), normalize(pages.quiet));
  // B's event id as A's cursor answers exactly as an id that does not exist.
  const b = new MemoryClient({
    baseUrl: services.busy.server!.url,
    apiKey: "key-b",
    allowPrivateNetwork: true,
  });
  const theirs = (await b.recallConversation({ ...scope, sessionId: "s1", limit: 1 })).events[0]!.id;
  const ask = async (cursor: string) => {
    const response = await fetch(`${services.busy.server!.url}/v1/conversations/recall`, {
      method: "POST",
      headers: { authorization: "Bearer key-a", "content-type": "application/json" },
      body: JSON.stringify({ ...scope, sessionId: "s1", cursor }),
    });
    return { status: response.status, body: await response.text() };
  };
  const foreign = await ask(theirs);
  assert.equal(foreign.status, 400);
  assert.deepEqual(foreign, await ask("no-such-event"));
  assert.ok(!foreign.body.includes(theirs));
  // A numeric cursor from an older version still pages, within the caller's own session only.
  const numeric = await services.busy.a!.recallConversation({
    ...scope,
    sessionId: "s1",
    cursor: "0",
    order: "asc",
  });
  assert.equal(numeric.events.length, 2);
  assert.ok(numeric.events.every((event) => !event.content.startsWith("B ")));
}

for (const kind of ["SQLite", "PostgreSQL"] as const) {
  describe(`on ${kind}`, () => {
    const databases: TestDatabase[] = [];
    before(() => openServices(kind, databases));
    after(async () => {
      for (const entry of Object.values(services)) {
        await entry.server?.close();
        delete entry.server;
      }
      for (const database of databases.splice(0)) await database.drop();
    });
    test("every route the app registers needs an API key and has an entry in this walk", routesNeedKeys);
    test(
      "every read route answers tenant A the same whether or not tenant B is busy on the same service",
      readsAlike,
    );
    test(
      "recall pages by the caller's own event ids: the cursors are the same on both services, another's id is refused as unknown",
      recallCursors,
    );
  });
}
