import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DurableError } from "../errors/durable-error.ts";
import { createRunner } from "../runner/create-runner.ts";
import { createMemoryStore } from "../stores/memory/memory-store.ts";
import { createGraph, END, START } from "./create-graph.ts";

const invalidGraph = (error: unknown) => DurableError.isInstance(error) && error.code === "invalid_graph";

describe("createGraph", () => {
  test("edges and conditional routes choose the path; a node's update merges into the state", async () => {
    type State = { amount: number; path: string[] };
    const graph = createGraph<State>("route")
      .node("classify", (state) => ({ path: [...state.path, "classify"] }))
      .node("small", (state) => ({ path: [...state.path, "small"] }))
      .node("large", (state) => ({ path: [...state.path, "large"] }))
      .node("notify", (state) => ({ path: [...state.path, "notify"] }))
      .edge(START, "classify")
      .branch("classify", (state) => (state.amount > 100 ? "large" : "small"))
      .edge("small", "notify")
      .edge("large", END);
    const runner = createRunner({ store: createMemoryStore() });
    const small = await runner.start(graph, { amount: 5, path: [] });
    const large = await runner.start(graph, { amount: 500, path: [] });
    assert.deepEqual(small.state, { amount: 5, path: ["classify", "small", "notify"] });
    assert.deepEqual(large.state, { amount: 500, path: ["classify", "large"] });
    assert.equal(large.node, null);
  });

  test("a malformed graph is refused with invalid_graph, naming the problem", () => {
    assert.throws(
      () =>
        createGraph()
          .node("a", () => {})
          .node("a", () => {}),
      invalidGraph,
    );
    assert.throws(() => createGraph().node("bad name", () => {}), invalidGraph);
    assert.throws(
      () =>
        createGraph()
          .node("a", () => {})
          .edge("a", "b")
          .edge("a", "c"),
      invalidGraph,
    );
    assert.throws(
      () =>
        createGraph()
          .node("a", () => {})
          .edge("a", "ghost")
          .entry(),
      /missing node "ghost"/,
    );
    assert.throws(() => createGraph().entry(), /no nodes/);
  });

  test("a router that names a missing node fails the run, and a node returning a non-object fails it too", async () => {
    const runner = createRunner({ store: createMemoryStore() });
    const lost = createGraph("lost")
      .node("a", () => {})
      .branch("a", () => "nowhere");
    const failed = await runner.start(lost, {});
    assert.equal(failed.status, "failed");
    assert.equal(failed.error?.code, "invalid_graph");
    const odd = createGraph("odd").node("a", () => 42 as never);
    assert.equal((await runner.start(odd, {})).error?.code, "invalid_update");
  });
});
