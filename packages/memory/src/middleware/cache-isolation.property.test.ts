import assert from "node:assert/strict";
import { it } from "node:test";
import fc from "fast-check";
import type { ContextBundleRequest } from "../schemas/synthesis.ts";
import { createMemoryMiddlewareCore } from "./create-memory-middleware-core.ts";
import type { MemoryIdentity } from "./memory-identity.ts";
import type { MemoryMiddlewareClient } from "./memory-middleware-client.ts";

/** The bundle a request deserves: its own scope and query spelled out, so any cross-over shows. */
function describeRequest(request: ContextBundleRequest): string {
  return `for user=${request.userId ?? "-"} agent=${request.agentId ?? "-"} session=${request.sessionId ?? "-"} query=${request.query ?? "-"}`;
}

const client: MemoryMiddlewareClient = {
  async contextBundle(request) {
    await new Promise((resolve) => setTimeout(resolve, Math.random() * 2));
    return {
      profile: {
        summary: "",
        preferences: [],
        facts: [],
        procedures: [],
        memoryIds: [],
        generatedBy: "deterministic",
      },
      coreMemory: [],
      memories: [
        {
          id: "m",
          kind: "fact",
          content: describeRequest(request),
          score: 1,
          createdAt: "2026-01-01T00:00:00Z",
        },
      ],
      recentEvents: [],
      tokenEstimate: 1,
      tokenBudget: 1200,
      truncated: false,
    };
  },
  async writeEvent() {
    return {} as never;
  },
};

it("property: concurrent calls with random identities only ever see their own bundle", async () => {
  const identity = fc.record(
    {
      userId: fc.constantFrom("alice", "bob", "alice "),
      agentId: fc.constantFrom("a1", "a2"),
      sessionId: fc.constantFrom("s1", "s2"),
      scope: fc.constantFrom<MemoryIdentity["scope"]>(["userId"], ["userId", "sessionId"], ["agentId"]),
    },
    { requiredKeys: [] },
  );
  const call = fc.record({ identity, query: fc.constantFrom("tea?", "coffee?", "tea? ") });
  await fc.assert(
    fc.asyncProperty(fc.array(call, { minLength: 1, maxLength: 30 }), async (calls) => {
      const core = createMemoryMiddlewareCore({
        client,
        apiUrl: "http://x",
        apiKey: "k",
        // Isolation, not latency, is under test here; the deadline has its own (stall) test.
        contextTimeoutMs: 30_000,
        onError: (error) => assert.fail(error),
      });
      const envelopes = await Promise.all(
        calls.map(({ identity, query }) =>
          core.getContext(identity as MemoryIdentity, [{ role: "user", text: query }]),
        ),
      );
      for (const [index, { identity, query }] of calls.entries()) {
        const scope = identity.scope ?? ["userId", "agentId"];
        const owners = ["userId", "agentId"].some((field) => identity[field as "userId"] !== undefined);
        const fields = identity.scope === undefined && !owners ? ["sessionId"] : scope;
        const expected: ContextBundleRequest = { query };
        for (const field of ["userId", "agentId", "sessionId"] as const) {
          if (fields.includes(field) && identity[field] !== undefined) expected[field] = identity[field];
        }
        if (Object.keys(expected).length === 1) {
          // Nobody named: the tenant is never read implicitly, so nothing is injected.
          assert.equal(envelopes[index], undefined, `call ${index} named no one`);
          continue;
        }
        assert.ok(
          envelopes[index]!.text.includes(`  ${describeRequest(expected)}`),
          `call ${index} got its own bundle`,
        );
      }
    }),
    { numRuns: 150 },
  );
});
