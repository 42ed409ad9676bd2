import assert from "node:assert/strict";
import { test } from "node:test";
import * as aiSdk from "./ai-sdk/index.ts";
import * as http from "./http/index.ts";
import * as durable from "./index.ts";
import * as langchain from "./langchain/index.ts";
import * as postgres from "./stores/postgres/index.ts";
import * as sqlite from "./stores/sqlite/index.ts";

test("the public surface of every subpath is pinned", () => {
  assert.deepEqual(Object.keys(durable).sort(), [
    "DurableError",
    "END",
    "Interrupt",
    "START",
    "approve",
    "codecVersion",
    "createGraph",
    "createMemoryStore",
    "createRunner",
    "decodeValue",
    "defaultNonRetryable",
    "encodeValue",
    "isInterrupt",
    "nextToolCallId",
    "nonRetryable",
    "redact",
    "runIntegratedTool",
    "tool",
    "toolTrace",
    "validatePolicies",
  ]);
  assert.deepEqual(Object.keys(aiSdk).sort(), ["durableModel", "withDurableTools"]);
  assert.deepEqual(Object.keys(langchain).sort(), ["withDurableTools"]);
  assert.deepEqual(Object.keys(http).sort(), [
    "AgUiTranslator",
    "agUiEventId",
    "createDurableApp",
    "createDurableClient",
    "parseAgUiEventId",
    "serveDurable",
    "toAgUiEvents",
  ]);
  assert.deepEqual(Object.keys(sqlite).sort(), ["createSqliteStore"]);
  assert.deepEqual(Object.keys(postgres).sort(), ["createPostgresStore"]);
});

test("an interrupt carries core's control-flow brand", async () => {
  const { isControlFlow } = await import("@tackle/core");
  assert.equal(isControlFlow(new durable.Interrupt([{ id: "x", request: null }])), true);
  assert.equal(durable.isInterrupt(new Error("x")), false);
});
