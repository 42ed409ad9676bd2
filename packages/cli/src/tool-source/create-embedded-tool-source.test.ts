import assert from "node:assert/strict";
import { test } from "node:test";
import { createToolSet } from "@tackle/core";
import demoTools from "../modules/demo.ts";
import { createEmbeddedToolSource } from "./create-embedded-tool-source.ts";

function source() {
  let closed = 0;
  const tools = createEmbeddedToolSource([
    { module: "zeta", toolset: createToolSet(demoTools), errors: [], close: () => void closed++ },
    {
      module: "alpha",
      toolset: createToolSet([]),
      errors: [{ source: "/x/alpha.js", message: "boom" }],
      close: () => void closed++,
    },
  ]);
  return { tools, closed: () => closed };
}

test("the catalogue lists every module in name order, a module that loaded nothing as failed", async () => {
  const modules = await source().tools.catalogue();
  assert.deepEqual(
    modules.map((info) => [info.module, info.status, info.tools.length, info.errors.length]),
    [
      ["alpha", "failed", 0, 1],
      ["zeta", "ok", 4, 0],
    ],
  );
  assert.equal(modules[1]?.tools.find((tool) => tool.name === "echo")?.inputSchema.type, "object");
});

test("calls route by module.tool; unknown modules and tools come back as unknown_tool naming what exists, a failed module as unavailable naming why", async () => {
  const { tools } = source();
  assert.deepEqual(await tools.call("zeta.add", { numbers: [1, 2] }), { ok: true, output: { sum: 3 } });
  const noModule = await tools.call("nope.add", {});
  assert.equal(noModule.ok, false);
  assert.ok(
    !noModule.ok && noModule.error.code === "unknown_tool" && noModule.error.message.includes("alpha, zeta"),
  );
  const noTool = await tools.call("zeta.subtract", {});
  assert.ok(!noTool.ok && noTool.error.code === "unknown_tool" && noTool.error.message.includes("zeta.add"));
  // A module that failed to load is named with its failure, not answered "unknown tool, none available".
  const failed = await tools.call("alpha.anything", {});
  assert.ok(!failed.ok);
  assert.equal(failed.error.code, "unavailable");
  assert.match(failed.error.message, /Module "alpha" failed to load.*\/x\/alpha\.js: boom/);
  const bare = await tools.call("add", {});
  assert.ok(!bare.ok && bare.error.code === "unknown_tool");
});

test("closing the source closes every module", async () => {
  const { tools, closed } = source();
  await tools.close();
  assert.equal(closed(), 2);
});
