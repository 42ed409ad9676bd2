import assert from "node:assert/strict";
import { test } from "node:test";
import { createPlanCache } from "./plan-cache.ts";
import { createKeyedSerializer } from "./serialize-by-key.ts";

test("the plan cache evicts the least recently used plan, never a pinned one", () => {
  const cache = createPlanCache<number>(2);
  cache.set("a", 1);
  cache.pin("a");
  cache.set("b", 2);
  cache.set("c", 3);
  assert.equal(cache.get("a"), 1);
  assert.equal(cache.get("b"), undefined);
  cache.get("c");
  cache.set("d", 4);
  assert.deepEqual([cache.get("a"), cache.get("c"), cache.get("d")], [1, undefined, 4]);
  cache.unpin("a");
  cache.set("e", 5);
  assert.equal(cache.size, 2);
  assert.equal(cache.get("a"), undefined);
});

test("tasks on one key run one at a time in order; other keys do not wait", async () => {
  const serializer = createKeyedSerializer();
  const events: string[] = [];
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const slow = serializer.run("doc", async () => {
    events.push("slow:start");
    await sleep(30);
    events.push("slow:end");
  });
  const failing = serializer.run("doc", async () => {
    events.push("failing");
    throw new Error("boom");
  });
  const after = serializer.run("doc", async () => events.push("after"));
  const other = serializer.run("other", async () => events.push("other"));
  await Promise.all([slow, failing.catch(() => {}), after, other]);
  assert.deepEqual(events, ["slow:start", "other", "slow:end", "failing", "after"]);
});
