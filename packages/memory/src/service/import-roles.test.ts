import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { waitForJob } from "../../test/support/conformance/cases.ts";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createMemoryService } from "./create-memory-service.ts";

it("an import skips turns whose role names an inherited property, like any role it does not know", async () => {
  const directory = mkdtempSync(join(tmpdir(), "memory-import-roles-"));
  const service = createMemoryService({ store: createSqliteStore({ path: join(directory, "memory.db") }) });
  try {
    const odd = [
      "narrator",
      "constructor",
      "toString",
      "__proto__",
      "hasOwnProperty",
      "valueOf",
      "Constructor",
    ];
    const messages = [
      { role: "user", content: "I live in Porto." },
      ...odd.map((role) => ({ role, content: `said as ${role}` })),
      { role: "assistant", content: "Noted: Porto." },
    ];
    const { job } = await service.importConversations("t", {
      userId: "u",
      format: "openai",
      infer: false,
      conversations: [{ id: "roles", messages }],
    });
    const done = await waitForJob(service, "t", job.id);
    assert.equal(done.status, "succeeded", JSON.stringify(done.error ?? null));
    assert.deepEqual((done.result as { events: unknown }).events, {
      created: 2,
      existing: 0,
      skipped: odd.length,
      truncated: 0,
    });
  } finally {
    await service.close();
    rmSync(directory, { recursive: true, force: true });
  }
});
