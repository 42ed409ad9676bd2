import assert from "node:assert/strict";
import { test } from "node:test";
import * as docscript from "../index.ts";

test("@tackle/docscript exports the tool's curated names", () => {
  const toolNames = [
    "commitPlan",
    "createDocScriptTool",
    "createEditScriptPool",
    "runEditScript",
    "scriptContract",
  ];
  const exported = Object.keys(docscript);
  for (const name of toolNames) assert.ok(exported.includes(name), `missing export ${name}`);
  assert.equal(typeof docscript.createDocScriptTool, "function");
  // The sandbox pool stays internal: a generic vm runner is not this package's promise.
  assert.equal(exported.includes("createSandboxPool"), false);
});
