/**
 * A refusal's issues, and a failure's message, are bounded: a caller's legal-looking call with ten thousand wrong items, or a key
 * of a megabyte, gets a short error it can act on, not one as large as what it sent (the whole list
 * made a 629 KB message and ten thousand issues, all handed to the model).
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { z } from "zod";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet, type ToolSet } from "../tool-set/create-tool-set.ts";
import { InvalidInputError } from "./invalid-input-error.ts";
import { InvalidOutputError } from "./invalid-output-error.ts";
import { ToolFailedError } from "./tool-failed-error.ts";
import { keptIssues } from "./validation-issue.ts";

/** Untyped, as a model's calls reach it. */
const toolset: ToolSet = createToolSet([
  defineTool({
    name: "orders.add",
    description: "Adds orders.",
    input: z.object({ items: z.array(z.object({ n: z.number() })) }).strict(),
    execute: () => 1,
  }),
]);

it("ten thousand wrong items: the first twenty issues, in order, and the count of the rest", async () => {
  const result = await toolset.call("orders.add", {
    items: Array.from({ length: 10_000 }, () => ({ n: "x" })),
  });
  assert.ok(!result.ok && InvalidInputError.isInstance(result.error));
  const { issues, omittedIssues } = result.error.data;
  assert.equal(issues.length, keptIssues);
  assert.deepEqual(
    issues.map((issue) => issue.path),
    Array.from({ length: keptIssues }, (_, index) => ["items", index, "n"]),
  );
  assert.equal(omittedIssues, 10_000 - keptIssues);
  assert.match(result.error.message, /items\.0\.n: .*; and 9980 more issues$/);
  assert.ok(result.error.message.length < 2_000, `${result.error.message.length} characters`);
});

it("a key of a megabyte and a long message are cut to their start, saying how long they were", () => {
  const key = "k".repeat(1_000_000);
  const error = new InvalidOutputError("orders.add", [
    { path: [key, ...Array.from({ length: 40 }, (_, index) => index)], message: "m".repeat(100_000) },
  ]);
  const [issue] = error.data.issues;
  assert.equal(issue?.path[0], `${"k".repeat(64)}… (1000000 characters)`);
  assert.equal(issue?.path.length, 17);
  assert.equal(issue?.path.at(-1), "… 25 more keys");
  assert.equal(issue?.message, `${"m".repeat(300)}… (100000 characters)`);
  assert.equal(error.data.omittedIssues, undefined);
  assert.ok(error.message.length < 1_000);
});

it("a refusal within the bounds is reported whole, as before", async () => {
  const result = await toolset.call("orders.add", { items: [{ n: "x" }], extra: true });
  assert.ok(!result.ok && InvalidInputError.isInstance(result.error));
  assert.equal(result.error.data.issues.length, 2);
  assert.equal("omittedIssues" in result.error.data, false);
  assert.doesNotMatch(result.error.message, /more issue/);
});

it("a thrown error's long message is cut in tool_failed; the cause keeps it whole", () => {
  const thrown = new Error(`bad input: ${"x".repeat(1_000_000)}`);
  const error = new ToolFailedError("orders.add", thrown);
  assert.ok(error.message.length < 2_100, `${error.message.length} characters`);
  assert.match(error.message, /… \(1000011 characters\)$/);
  assert.equal(error.cause, thrown);
  assert.equal(
    new ToolFailedError("orders.add", new Error("short")).message,
    'Tool "orders.add" failed: short',
  );
});
