/**
 * What paging a long answer costs the host (ADR 0558): the characters the cuts read to find their
 * boundaries (the JSON nesting, a line's end), counted by the scanner itself. Each cut once read the
 * JSON text from its start, so the parts of a 2 MB answer read about parts × offset: 105 parts, 105
 * million characters. Now a part reads about itself, whichever is asked, in any order.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { CallToolResult } from "@modelcontextprotocol/server";
import { createResultPages } from "./create-result-pages.ts";
import { checkpointSpacing, scannedCharacters } from "./text-scan.ts";

const rows = Array.from({ length: 21_000 }, (_, id) => ({
  id,
  name: `item "${id}" \\ ${"数".repeat(id % 5)}`,
  tags: ["a", "b,c", { nested: [id, id / 7] }],
}));
/** About 2 MB of JSON on one line. */
const json = JSON.stringify({ rows });
/** About 2 MB of prose on one line: no JSON, no line end to cut after. */
const prose = "the quick brown fox jumps over a lazy dog while seventeen engineers argue ".repeat(27_000);

/** Every part's text, read by the cursors in order (then again, every cursor from the last), and the characters the cuts read. */
function pageThrough(text: string): { parts: string[]; inOrder: number; backwards: number } {
  const pages = createResultPages();
  const before = scannedCharacters.count;
  let answer = pages.fit({ content: [{ type: "text", text }] }, "owner");
  const parts = [partText(answer)];
  const cursors: string[] = [];
  for (let cursor = cursorOf(answer); cursor !== undefined; cursor = cursorOf(answer)) {
    cursors.push(cursor);
    answer = pages.page({ cursor }, "owner");
    parts.push(partText(answer));
  }
  const inOrder = scannedCharacters.count - before;
  for (let index = cursors.length - 1; index >= 0; index--) {
    const again = pages.page({ cursor: cursors[index] as string }, "owner");
    assert.equal(partText(again), parts[index + 1], "a part read again is the same");
  }
  return { parts, inOrder, backwards: scannedCharacters.count - before - inOrder };
}

function cursorOf(answer: CallToolResult): string | undefined {
  return (answer._meta?.["tackle/resultPage"] as { cursor?: string } | undefined)?.cursor;
}

function partText(answer: CallToolResult): string {
  const first = answer.content[0];
  return first?.type === "text" ? first.text : "";
}

test("paging a 2 MB answer reads the text at most a few times over, in order or backwards, not the text before each part", () => {
  for (const [kind, text] of Object.entries({ json, prose })) {
    const { parts, inOrder, backwards } = pageThrough(text);
    process.stdout.write(
      `# ${kind}: ${text.length} characters, ${parts.length} parts: read ${inOrder} in order, ${backwards} backwards\n`,
    );
    assert.equal(parts.join(""), text, `${kind}: the parts joined are the answer`);
    assert.ok(parts.length > 40, `${kind}: ${parts.length} parts`);
    assert.ok(
      inOrder <= 4 * text.length,
      `${kind}: ${parts.length} parts in order read ${inOrder} characters of ${text.length}`,
    );
    assert.ok(
      backwards <= 2 * text.length + parts.length * checkpointSpacing,
      `${kind}: the parts again, last first, read ${backwards} characters of ${text.length}`,
    );
  }
});
