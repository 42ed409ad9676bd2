import assert from "node:assert/strict";
import { it } from "node:test";
import { waitForJob } from "../../test/support/conformance/cases.ts";
import { IMPORT_LIMITS } from "../schemas/admin.ts";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createMemoryService } from "./create-memory-service.ts";

it("an import past its bounds is refused in process, where no body limit applies, quickly, and stores nothing", async () => {
  const service = createMemoryService({ store: createSqliteStore({ path: ":memory:" }) });
  const message = (extra: Record<string, unknown>) => ({ role: "user", content: "hello", ...extra });
  let deep: unknown = "leaf";
  for (let level = 0; level < 10_000; level += 1) deep = { a: deep };
  const half = "x".repeat(IMPORT_LIMITS.bytes / 2);
  const cases: [string, ReturnType<typeof message>[], RegExp][] = [
    // Each turn would be stored cut at 32,000 characters, but the transcript is kept whole in its job.
    ["text", [message({ content: half }), message({ content: half })], /at most 4194304 bytes as JSON/],
    ["one string", [message({ content: `${half}${half}!` })], /a string of 4194305 characters/],
    ["nesting", [message({ tool_calls: deep })], /nests at most 16 levels deep/],
    ["width", [message({ tool_calls: new Array(250_000).fill(0) })], /at most 200000 keys and array items/],
    ["__proto__", [JSON.parse('{"role":"user","content":"hi","__proto__":{"admin":true}}')], /"__proto__"/],
  ];
  for (const [name, messages, expected] of cases) {
    const started = performance.now();
    await assert.rejects(
      service.importConversations("t", { userId: "u", format: "openai", conversations: [{ messages }] }),
      (error: Error & { code?: string }) => {
        assert.equal(error.code, "invalid_input", name);
        assert.match(error.message, expected, name);
        assert.match(error.message, /an import's transcript/, name);
        return true;
      },
    );
    assert.ok(performance.now() - started < 2_000, `${name}: refused without a long computation`);
  }
  assert.deepEqual((await service.listJobs("t", {})).jobs, [], "no job was stored");

  // Just within the bounds, the same shapes import; the long turn is stored cut and counted.
  const { job } = await service.importConversations("t", {
    userId: "u",
    format: "openai",
    infer: false,
    conversations: [
      {
        id: "within",
        messages: [
          message({ content: "x".repeat(IMPORT_LIMITS.bytes - 1_000) }),
          message({ tool_calls: [] }),
        ],
      },
    ],
  });
  const done = await waitForJob(service, "t", job.id);
  assert.equal(done.status, "succeeded");
  assert.deepEqual((done.result as { events: unknown }).events, {
    created: 2,
    existing: 0,
    skipped: 0,
    truncated: 1,
  });
  await service.close();
});
