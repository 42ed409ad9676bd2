import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { createMemoryService } from "../service/create-memory-service.ts";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createMemoryApp } from "./create-memory-app.ts";

const exporter = new InMemorySpanExporter();
before(() => {
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
  );
});
after(() => trace.disable());

it("records a span per operation with the tenant, the route and the outcome", async () => {
  const service = createMemoryService({ store: createSqliteStore({ path: ":memory:" }) });
  const app = createMemoryApp({ service, apiKeys: { key: "tenant-1" } });
  const call = (path: string, body: unknown) =>
    app.request(path, {
      method: "POST",
      headers: { authorization: "Bearer key", "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  await call("/v1/memories", { userId: "u", content: "Traced memory" });
  await call("/v1/memories/search", { userId: "u", query: "traced" });
  await call("/v1/core-memory", {
    edits: [{ op: "replace", label: "human", oldText: "absent", newText: "x" }],
  });
  const spans = exporter.getFinishedSpans();
  assert.deepEqual(
    spans.map((span) => span.name),
    ["memory.add", "memory.search", "memory.selfEdit"],
  );
  assert.equal(spans[1]?.attributes["memory.tenant_id"], "tenant-1");
  assert.equal(spans[1]?.attributes["http.route"], "/v1/memories/search");
  assert.equal(spans[1]?.attributes["memory.result_count"], 1);
  assert.equal(spans[2]?.attributes["error.type"], "edit_no_match");
  await service.close();
});
