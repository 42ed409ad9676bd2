import assert from "node:assert/strict";
import { it } from "node:test";
import * as openai from "./index.ts";

it("@tackle/memory/openai exports exactly its curated names", () => {
  assert.deepEqual(Object.keys(openai).sort(), ["createOpenAIMiddleware"]);
});
