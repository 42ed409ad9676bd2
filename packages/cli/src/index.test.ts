import assert from "node:assert/strict";
import { test } from "node:test";
import * as cli from "./index.ts";

test("the public API is exactly these names", () => {
  assert.deepEqual(Object.keys(cli).sort(), [
    "CliError",
    "builtinModules",
    "builtinModulesSetting",
    "consoleTokenPath",
    "createApprovalCalls",
    "createConsoleToolSource",
    "createEmbeddedToolSource",
    "createMcpServer",
    "createMeshToolSource",
    "createProgram",
    "ensureConsoleToken",
    "modulesToolName",
    "readConsoleToken",
    "startConsole",
    "tackleHome",
  ]);
});
