/**
 * Identity as a property, over all 27 tools and every HTTP route of the real service: three
 * identities — alice and bob in one tenant, alice again in a second tenant — each own memories,
 * events, a document, core memory, traces and jobs. Random calls by one identity, aimed at ids of all
 * three (its own and the others'), never answer any id or text of another identity's data: by id
 * they answer `not_found`, by scope they answer only the caller's own.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createToolSet, type ToolSet } from "@tackle/core";
import { underLoadMs } from "@tackle/test-support";
import fc from "fast-check";
import type { MemoryClient } from "../src/client/memory-client.ts";
import { memoryRoutes } from "../src/server/routes.ts";
import { createMemoryTools } from "../src/tools/create-memory-tools.ts";
import { type MemoryFixture, startMemoryFixture, TENANT_KEYS } from "./support/start-memory-fixture.ts";

type Tenant = keyof typeof TENANT_KEYS;

interface Identity {
  readonly name: string;
  readonly tenant: Tenant;
  readonly userId: string;
  /** A word only this identity's data carries. */
  readonly marker: string;
  readonly ids: Set<string>;
}

const identities: Identity[] = [
  { name: "acme/alice", tenant: "acme", userId: "alice", marker: "zanzibar", ids: new Set() },
  { name: "acme/bob", tenant: "acme", userId: "bob", marker: "quokka", ids: new Set() },
  { name: "globex/alice", tenant: "globex", userId: "alice", marker: "xylophone", ids: new Set() },
];

let memory: MemoryFixture;
const toolSets = new Map<Tenant, ToolSet>();
const clients = new Map<Tenant, MemoryClient>();

/** Every id found anywhere in an answer (uuid-shaped strings). */
function idsIn(value: unknown): string[] {
  return (
    JSON.stringify(value ?? null).match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g) ?? []
  );
}

/** Seeds one identity's data through its own tools (the identity bound in the tool context). */
async function seed(identity: Identity) {
  const tools = toolSets.get(identity.tenant)!;
  const own = { identity: { userId: identity.userId } };
  // biome-ignore lint/suspicious/noExplicitAny: answers are read loosely
  const call = async (name: string, args: unknown): Promise<any> => {
    const answer = await tools.invoke(name, args, own);
    for (const id of idsIn(answer)) identity.ids.add(id);
    return answer;
  };
  const m = identity.marker;
  const added = await call("memory_add", { content: `I keep a ${m} in the garden shed`, kind: "fact" });
  await call("memory_add", { content: `My favourite ${m} recipe uses lemon`, kind: "procedure" });
  await call("memory_write_event", {
    sessionId: "s1",
    role: "user",
    content: `I prefer ${m} tea in the evening`,
    customId: `seed-${identity.userId}`,
  });
  await call("memory_write_event", { sessionId: "s1", role: "assistant", content: `Noted: ${m} tea.` });
  const client = clients.get(identity.tenant)!;
  const document = await client.ingestDocument({
    userId: identity.userId,
    title: `${m} handbook`,
    content: `The ${m} handbook says garden sheds need lemon oil.`,
  });
  for (const id of idsIn(document)) identity.ids.add(id);
  await call("memory_self_edit", { edits: [{ op: "append", label: "human", text: `Owns a ${m}.` }] });
  await call("memory_search", { query: `garden ${m}` });
  await call("memory_search_kb", { query: `handbook ${m}` });
  await call("memory_build_context_bundle", { query: `tea ${m}` });
  await call("memory_feedback", { id: added.id, rating: "helpful" });
  const imported = await call("memory_import_conversations", {
    format: "openai",
    conversations: [{ sessionId: "s2", messages: [{ role: "user", content: `I like ${m} cake` }] }],
  });
  await client.waitForJob(imported.job.id, {
    timeoutMs: underLoadMs(20_000),
    scope: { userId: identity.userId },
  });
  const consolidation = await call("memory_consolidate", {});
  await client.waitForJob(consolidation.job.id, {
    timeoutMs: underLoadMs(20_000),
    scope: { userId: identity.userId },
  });
  await call("memory_novelty_scan", { candidates: [`I keep a ${m} in the garden shed`] });
  // Everything the identity now owns, read back whole, so every id it holds is known.
  await call("memory_state_unified", {});
  await call("memory_admin_list_traces", { limit: 200 });
  await call("memory_list_jobs", { limit: 200 });
  await call("memory_recall_conversation", { sessionId: "s1", limit: 200 });
  await call("memory_recall_conversation", { sessionId: "s2", limit: 200 });
  await call("memory_admin_access_summaries", {});
  for (const id of [...identity.ids]) {
    await tools.call("memory_chain_trace", { id }, own).then((result) => {
      for (const found of idsIn(result)) identity.ids.add(found);
    });
  }
}

before(async () => {
  memory = await startMemoryFixture();
  for (const tenant of Object.keys(TENANT_KEYS) as Tenant[]) {
    clients.set(tenant, memory.client(tenant));
    toolSets.set(tenant, createToolSet(createMemoryTools(memory.client(tenant))));
  }
  for (const identity of identities) await seed(identity);
  for (const identity of identities) {
    assert.ok(identity.ids.size >= 12, `${identity.name} owns too little to test (${identity.ids.size} ids)`);
  }
});
after(() => memory.close());

/** What one identity must never see: the others' ids (except the ones it sent) and their markers. */
function assertNothingOfOthers(actor: Identity, sent: unknown, answer: unknown, what: string) {
  const text = JSON.stringify(answer ?? null);
  const sentIds = new Set(idsIn(sent));
  for (const other of identities) {
    if (other === actor) continue;
    assert.ok(
      !text.includes(other.marker),
      `${what} by ${actor.name} answered ${other.name}'s text: ${text}`,
    );
    for (const id of other.ids) {
      if (actor.ids.has(id) || sentIds.has(id)) continue;
      assert.ok(!text.includes(id), `${what} by ${actor.name} answered ${other.name}'s id ${id}: ${text}`);
    }
  }
}

const words = ["garden", "tea", "lemon", "cake", "handbook", "shed"] as const;

/** Arguments for each tool; `id` is aimed at any identity's data, `word` is a shared word. */
function toolArgs(name: string, id: string, word: string, actor: Identity): unknown {
  const mine = `${actor.marker} ${word}`;
  switch (name) {
    case "memory_search":
      return { query: word, limit: 20 };
    case "memory_search_kb":
      return { query: word, limit: 20 };
    case "memory_recall_conversation":
      return { sessionId: word === "tea" ? "s2" : "s1", limit: 200 };
    case "memory_add":
      return { content: `Another note about ${mine}`, kind: "fact" };
    case "memory_write_event":
      return { role: "user", content: `I mention ${mine}`, sessionId: "s3" };
    case "memory_self_edit":
      return { edits: [] };
    case "memory_profile":
    case "memory_state_unified":
    case "memory_status":
      return {};
    case "memory_build_context_bundle":
      return { query: word };
    case "memory_lifecycle_get":
    case "memory_lifecycle_history":
    case "memory_chain_trace":
    case "memory_admin_get_trace":
    case "memory_get_job":
      return { id };
    case "memory_lifecycle_update":
      return { id, importance: 0.7 };
    case "memory_lifecycle_delete":
      return { id, reason: "tested" };
    case "memory_procedure_outcome":
      return { id, success: true };
    case "memory_feedback":
      return { id, rating: "unhelpful" };
    case "memory_novelty_scan":
      return { candidates: [`Something about ${word}`] };
    case "memory_consolidate":
      return { staleAfterDays: 3650 };
    case "memory_import_conversations":
      return {
        format: "openai",
        conversations: [{ messages: [{ role: "user", content: `I like ${mine}` }] }],
      };
    case "memory_admin_access_trends":
      return { days: 7 };
    case "memory_admin_access_summaries":
      return { limit: 100 };
    case "memory_list":
    case "memory_admin_list_traces":
    case "memory_list_jobs":
      return { limit: 200 };
    default:
      throw new Error(`no arguments for ${name}`);
  }
}

function allIds(): string[] {
  return identities.flatMap((identity) => [...identity.ids]);
}

describe("identity across every tool and route", () => {
  it("all 27 tools: no answer to one identity carries an id or text of another's", async () => {
    const names = [...toolSets.get("acme")!.names].sort();
    assert.equal(names.length, 27);
    const pool = allIds();
    const outcomes = { ok: 0, notFound: 0, foreignTargets: 0 };
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...identities),
        fc.constantFrom(...names),
        fc.constantFrom(...pool),
        fc.constantFrom(...words),
        async (actor, name, id, word) => {
          const args = toolArgs(name, id, word, actor);
          const result = await toolSets.get(actor.tenant)!.call(name, args, {
            identity: { userId: actor.userId },
          });
          if (result.ok) {
            outcomes.ok += 1;
            for (const found of idsIn(result)) if (!allIds().includes(found)) actor.ids.add(found);
          }
          const foreign = "id" in (args as object) && !actor.ids.has(id);
          if (foreign) {
            outcomes.foreignTargets += 1;
            assert.equal(result.ok, false, `${name} by ${actor.name} reached another identity's ${id}`);
            assert.equal(
              (result as { error: { code: string } }).error.code,
              "not_found",
              `${name} on a foreign id`,
            );
            outcomes.notFound += 1;
          }
          assertNothingOfOthers(actor, args, result, name);
        },
      ),
      { numRuns: 300 },
    );
    // Not vacuous: calls succeeded, and many were aimed at other identities' ids.
    assert.ok(outcomes.ok > 100, `only ${outcomes.ok} calls succeeded`);
    assert.ok(outcomes.foreignTargets > 30, `only ${outcomes.foreignTargets} calls aimed at foreign ids`);
    // Every tool, aimed at every other identity's ids of every kind, by every identity.
    for (const actor of identities) {
      for (const name of names) {
        for (const other of identities) {
          if (other === actor) continue;
          for (const id of other.ids) {
            const args = toolArgs(name, id, "garden", actor);
            if (!("id" in (args as object))) continue;
            const result = await toolSets.get(actor.tenant)!.call(name, args, {
              identity: { userId: actor.userId },
            });
            assert.equal(result.ok, false, `${name} by ${actor.name} reached ${other.name}'s ${id}`);
            assertNothingOfOthers(actor, args, result, name);
          }
        }
      }
    }
  });

  it("every HTTP route: called with the caller's identity, no answer carries another identity's data", async () => {
    const pool = allIds();
    let calls = 0;
    for (const route of memoryRoutes) {
      for (const actor of identities) {
        for (const id of route.path.includes("{id}") ? pool : [""]) {
          const url = new URL(memory.apiUrl + route.path.replace("{id}", encodeURIComponent(id)));
          const body = routeBody(route.operationId, actor);
          const init: RequestInit = {
            method: route.method.toUpperCase(),
            headers: {
              authorization: `Bearer ${TENANT_KEYS[actor.tenant]}`,
              "content-type": "application/json",
            },
          };
          if (route.method === "get" || route.method === "delete" || route.path.includes("{id}")) {
            url.searchParams.set("userId", actor.userId);
            if (route.operationId === "listJobs" || route.operationId === "listTraces")
              url.searchParams.set("limit", "200");
          }
          if (route.method !== "get" && route.method !== "delete") init.body = JSON.stringify(body);
          const response = await fetch(url, init);
          const answer = await response.json();
          calls += 1;
          if (id !== "" && !actor.ids.has(id)) {
            assert.equal(response.status, 404, `${route.operationId} by ${actor.name} reached ${id}`);
          } else if (response.ok) {
            for (const found of idsIn(answer)) if (!pool.includes(found)) actor.ids.add(found);
          }
          assertNothingOfOthers(actor, { id, body }, answer, `${route.method.toUpperCase()} ${route.path}`);
        }
      }
    }
    assert.ok(calls > memoryRoutes.length * identities.length);
  });
});

/** A request body for each route, in the caller's own scope. */
function routeBody(operationId: string, actor: Identity): Record<string, unknown> {
  const scope = { userId: actor.userId };
  switch (operationId) {
    case "search":
    case "searchKnowledge":
      return { ...scope, query: "garden", limit: 50 };
    case "add":
      return { ...scope, content: `A routed note about ${actor.marker} sheds` };
    case "addBatch":
      return { ...scope, memories: [{ content: `A batched note about ${actor.marker} sheds` }] };
    case "writeEvent":
      return { ...scope, role: "user", content: `Routed ${actor.marker} turn` };
    case "recallConversation":
      return { ...scope, sessionId: "s1", limit: 200 };
    case "ingestDocument":
      return { ...scope, title: "routed", content: `Routed ${actor.marker} document` };
    case "selfEdit":
      return { ...scope, edits: [] };
    case "contextBundle":
      return { ...scope, query: "tea" };
    case "noveltyScan":
      return { ...scope, candidates: ["garden tea"] };
    case "importConversations":
      return { ...scope, format: "openai", conversations: [{ messages: [{ role: "user", content: "hi" }] }] };
    case "updateMemory":
      return { importance: 0.6 };
    case "recordProcedureOutcome":
      return { success: false };
    case "recordFeedback":
      return { rating: "helpful" };
    case "accessTrends":
      return { ...scope, days: 3 };
    default:
      return scope;
  }
}
