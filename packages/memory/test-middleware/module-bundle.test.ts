import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { createToolSet, silentLogger } from "@tackle/core";
import memoryBundle, { defaultMemoryStore } from "../src/module/bundle.ts";

describe("the memory module bundle", () => {
  it("serves the 27 tools (and its mcp seat: memories as resources, the guide prompt) over an embedded SQLite service that survives a restart", async (context) => {
    const home = mkdtempSync(join(tmpdir(), "tackle-home-"));
    context.after(() => rmSync(home, { recursive: true, force: true }));
    const bundleContext = {
      module: "memory",
      node: "test-node",
      env: { TACKLE_HOME: home },
      logger: silentLogger,
    };

    const first = await memoryBundle(bundleContext);
    assert.equal(first.tools.filter((tool) => !tool.name.startsWith("mcp.")).length, 27);
    assert.deepEqual(
      first.tools.filter((tool) => tool.name.startsWith("mcp.")).map((tool) => tool.name),
      ["mcp.resources", "mcp.read", "mcp.versions", "mcp.complete", "mcp.prompts", "mcp.prompt"],
    );
    const tools = createToolSet(first.tools);
    await tools.invoke("memory_add", { userId: "erin", content: "Erin's favourite editor is Helix" });
    await first.close();
    assert.ok(existsSync(join(home, "memory.db")), "the store is a file under TACKLE_HOME");

    const second = await memoryBundle(bundleContext);
    context.after(() => second.close());
    const found = (await createToolSet(second.tools).invoke("memory_search", {
      userId: "erin",
      query: "editor",
    })) as {
      results: { text: string }[];
    };
    assert.equal(found.results[0]?.text, "Erin's favourite editor is Helix");
  });

  it("puts the store under ~/.tackle unless TACKLE_HOME or TACKLE_MEMORY_STORE says otherwise", () => {
    assert.match(defaultMemoryStore({}), /\.tackle\/memory\.db$/);
    assert.equal(defaultMemoryStore({ TACKLE_HOME: "/srv/tackle" }), "/srv/tackle/memory.db");
    assert.equal(
      defaultMemoryStore({ TACKLE_HOME: "/srv/tackle", TACKLE_MEMORY_STORE: "/data/m.db" }),
      "/data/m.db",
    );
  });
});
