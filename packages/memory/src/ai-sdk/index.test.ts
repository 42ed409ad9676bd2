import assert from "node:assert/strict";
import { it } from "node:test";
import * as aiSdk from "./index.ts";

it("@tackle/memory/ai-sdk exports exactly its curated names", () => {
  assert.deepEqual(Object.keys(aiSdk).sort(), ["createMemoryMiddleware", "withMemory"]);
});
