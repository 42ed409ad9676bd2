import assert from "node:assert/strict";
import { it } from "node:test";
import * as core from "./index.ts";

it("@tackle/core exports exactly its curated names", () => {
  assert.deepEqual(Object.keys(core).sort(), [
    "DEFAULT_TIMEOUT_MS",
    "InvalidInputError",
    "InvalidOutputError",
    "ToolAbortedError",
    "ToolDefinitionError",
    "ToolError",
    "ToolFailedError",
    "ToolTimeoutError",
    "UnknownToolError",
    "controlFlowBrand",
    "createToolSet",
    "defineTool",
    "isControlFlow",
    "isNotFound",
    "isToolContent",
    "jsonSchema",
    "silentLogger",
    "toJsonSchema",
    "toToolError",
    "toolContent",
    "validateWith",
  ]);
});
