import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { toolContent } from "@tackle/core";
import { formatCallOutput } from "./format-call-output.ts";

describe("formatCallOutput", () => {
  test("a JSON value prints as indented JSON", () => {
    assert.equal(formatCallOutput({ sum: 5 }), '{\n  "sum": 5\n}\n');
    assert.equal(formatCallOutput(undefined), "null\n");
  });

  test("text-only content prints as plain text, never the content marker", () => {
    const printed = formatCallOutput(
      toolContent([
        { type: "text", text: 'plain "words"' },
        { type: "text", text: "second" },
      ]),
    );
    assert.equal(printed, 'plain "words"\nsecond\n');
    assert.doesNotMatch(printed, /tackle\/content/);
  });

  test("content that crossed a wire as JSON prints the same", () => {
    const wire = JSON.parse(JSON.stringify(toolContent([{ type: "text", text: "hi" }])));
    assert.equal(formatCallOutput(wire), "hi\n");
  });

  test("structured content beside the blocks prints as the JSON object", () => {
    const printed = formatCallOutput(
      toolContent([{ type: "text", text: "3 words" }], { structuredContent: { words: 3 } }),
    );
    assert.deepEqual(JSON.parse(printed), { words: 3 });
  });

  test("images and mixed blocks print as the blocks, as JSON", () => {
    const image = { type: "image" as const, data: "iVBORw0KGgo=", mimeType: "image/png" };
    const printed = formatCallOutput(toolContent([{ type: "text", text: "a dot" }, image]));
    assert.deepEqual(JSON.parse(printed), { content: [{ type: "text", text: "a dot" }, image] });
    assert.doesNotMatch(printed, /tackle\/content/);
  });
});
