import assert from "node:assert/strict";
import { it } from "node:test";
import * as adapter from "./index.ts";

it("@tackle/core/mcp exports exactly its curated names", () => {
  assert.deepEqual(Object.keys(adapter).sort(), [
    "createMcpHttpHandler",
    "createMcpServer",
    "createResultPages",
    "defaultResultBudget",
    "mcpCallOptions",
    "serveMcpHttp",
    "serveMcpStdio",
    "toCallToolResult",
    "toolSetFromMcp",
  ]);
});
