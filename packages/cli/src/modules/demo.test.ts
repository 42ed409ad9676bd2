import assert from "node:assert/strict";
import { test } from "node:test";
import { createToolSet } from "@tackle/core";
import demoTools from "./demo.ts";

const demo = createToolSet(demoTools);

test("the demo module's tools answer as a user would expect", async () => {
  assert.deepEqual(demo.names, ["echo", "add", "now", "text_stats"]);
  assert.deepEqual(await demo.invoke("echo", { text: "hi" }), { text: "hi" });
  assert.deepEqual(await demo.invoke("add", { numbers: [0.5, 0.25, -1] }), { sum: -0.25 });
  assert.deepEqual(await demo.invoke("text_stats", { text: "One two. Three!\nFour?" }), {
    characters: 21,
    words: 4,
    lines: 2,
    sentences: 3,
  });
  const now = (await demo.invoke("now", { timeZone: "Asia/Tokyo" })) as {
    iso: string;
    epochMs: number;
    local: string;
  };
  assert.ok(Math.abs(now.epochMs - Date.now()) < 5_000);
  assert.match(now.local, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
});

test("bad input is refused as data, and an unknown time zone fails the call, not the process", async () => {
  const empty = await demo.call("add", { numbers: [] });
  assert.ok(!empty.ok && empty.error.code === "invalid_input");
  const zone = await demo.call("now", { timeZone: "Mars/Olympus" });
  assert.ok(!zone.ok && zone.error.code === "tool_failed");
});
