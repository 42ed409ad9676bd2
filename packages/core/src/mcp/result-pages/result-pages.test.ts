import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";
import type { CallToolResult } from "@modelcontextprotocol/server";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { countTokens as countSliced } from "../../tokens/count-tokens.ts";
import { createResultPages } from "./create-result-pages.ts";
import { mediaTokens } from "./result-items.ts";

type Block = CallToolResult["content"][number];

/** The tokens a model reads in an answer: its text, and each image or audio block as the budget counts it. */
function tokensRead(result: CallToolResult): number {
  let total = 0;
  for (const block of result.content) {
    if (block.type === "text") total += countTokens(block.text, { disallowedSpecial: new Set() });
    else total += mediaTokens;
  }
  return total;
}

function cursorOf(result: CallToolResult): string | undefined {
  return (result._meta?.["tackle/resultPage"] as { cursor?: string } | undefined)?.cursor;
}

/** The answer's parts without the summary line at its end. */
function body(result: CallToolResult): Block[] {
  return result.content.slice(0, -1);
}

/** Every part of a cut answer, by cursor, from the first answer on. */
function readAll(pages: ReturnType<typeof createResultPages>, first: CallToolResult, owner: string) {
  const parts = [first];
  let cursor = cursorOf(first);
  while (cursor !== undefined) {
    const next = pages.page({ cursor }, owner);
    assert.notEqual(next.isError, true, JSON.stringify(next.content));
    parts.push(next);
    cursor = cursorOf(next);
  }
  return parts;
}

/** Text blocks joined back: the pieces of one block follow each other, so joining restores it. */
function joinedText(parts: readonly CallToolResult[]): string {
  return parts
    .flatMap((part) => body(part).map((block) => (block.type === "text" ? block.text : "")))
    .join("");
}

describe("result pages: passing through and cutting text and JSON", () => {
  it("passes a result within the budget through as the same object", () => {
    const pages = createResultPages();
    const small: CallToolResult = { content: [{ type: "text", text: "short" }], structuredContent: { a: 1 } };
    assert.equal(pages.fit(small, "one"), small);
  });

  it("judges a small answer by its bytes: the tokenizer's tables are not even loaded", () => {
    const probe = `
      import { createRequire } from "node:module";
      const { createResultPages } = await import("@tackle/core/mcp");
      const small = { content: [{ type: "text", text: "short answer" }], structuredContent: { a: 1 } };
      const same = createResultPages().fit(small, "one") === small;
      const loaded = Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes("gpt-tokenizer"));
      process.stdout.write(JSON.stringify({ same, loaded }));
    `;
    const run = spawnSync(
      process.execPath,
      ["--conditions=@tackle/source", "--input-type=module", "--eval", probe],
      {
        cwd: import.meta.dirname,
        encoding: "utf8",
        timeout: 60_000,
      },
    );
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), { same: true, loaded: false });
  });

  it("cuts a long text at line ends within the budget and pages the rest exactly once, in order", () => {
    const pages = createResultPages({ budget: 2_000 });
    const text = Array.from(
      { length: 3_000 },
      (_, line) => `line ${line}: ${"word ".repeat(line % 13)}`,
    ).join("\n");
    const first = pages.fit({ content: [{ type: "text", text }] }, "one");
    const summary = first.content.at(-1) as { text: string };
    assert.match(summary.text, /Answer cut to fit the budget of 2000 tokens/);
    assert.match(summary.text, new RegExp(`${text.length} characters of text`));
    assert.match(summary.text, /Left out: the rest of item 1 \(\d+ characters of text\)/);
    const parts = readAll(pages, first, "one");
    assert.ok(parts.length > 5, `${parts.length} parts`);
    for (const part of parts) assert.ok(tokensRead(part) <= 2_000, `a part of ${tokensRead(part)} tokens`);
    assert.equal(joinedText(parts), text);
    for (const part of parts.slice(0, -1)) {
      assert.ok((body(part)[0] as { text: string }).text.endsWith("\n"), "a part ends mid-line");
    }
    const last = parts[parts.length - 1] as CallToolResult;
    assert.match((last.content.at(-1) as { text: string }).text, /This is the last part/);
  });

  it("cuts JSON after whole elements of its outermost list", () => {
    const pages = createResultPages({ budget: 1_500 });
    const value = {
      items: Array.from({ length: 800 }, (_, index) => ({
        id: index,
        name: `item ${index}`,
        tags: ["a", "b"],
      })),
    };
    const first = pages.fit(
      { content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: value },
      "one",
    );
    assert.equal(first.structuredContent, undefined);
    const parts = readAll(pages, first, "one");
    for (const part of parts) assert.ok(tokensRead(part) <= 1_500);
    for (const part of parts.slice(0, -1)) assert.match((body(part)[0] as { text: string }).text, /\},$/);
    assert.deepEqual(JSON.parse(joinedText(parts)), value);
  });

  it("pages structured content once: as the text block that carries it, however spaced, or as its JSON", () => {
    const pages = createResultPages({ budget: 1_500 });
    const value = { items: Array.from({ length: 600 }, (_, id) => ({ id, title: `record ${id}` })) };
    const spaced = JSON.stringify(value).replaceAll(",", ", ").replaceAll('":', '": ');
    const carried = readAll(
      pages,
      pages.fit({ content: [{ type: "text", text: spaced }], structuredContent: value }, "one"),
      "one",
    );
    assert.equal(joinedText(carried), spaced);
    const beside = readAll(
      pages,
      pages.fit({ content: [{ type: "text", text: "600 records" }], structuredContent: value }, "one"),
      "one",
    );
    assert.equal(joinedText(beside), `600 records${JSON.stringify(value)}`);
  });
});

describe("result pages: a tool that declares an output schema (ADR 0542)", () => {
  const declared = { tool: "rows.list", outputSchema: true } as const;
  const value = { items: Array.from({ length: 800 }, (_, id) => ({ id, name: `item ${id}` })) };
  const error = (result: CallToolResult) =>
    (result.structuredContent as { error: { code: string; message: string; data: Record<string, unknown> } })
      .error;

  it("keeps a structure within the budget whole beside cut text", () => {
    const pages = createResultPages({ budget: 1_500 });
    const small = { n: 1 };
    const first = pages.fit(
      { content: [{ type: "text", text: "x y ".repeat(5_000) }], structuredContent: small },
      "one",
      declared,
    );
    assert.equal(first.structuredContent, small);
    assert.equal(first.isError, undefined);
    assert.ok(cursorOf(first) !== undefined);
  });

  it("leaves out a structure past the budget: an answer_too_large error, the first part beside it", () => {
    const pages = createResultPages({ budget: 1_500 });
    const first = pages.fit(
      { content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: value },
      "one",
      declared,
    );
    assert.equal(first.isError, true);
    const { code, message, data } = error(first);
    assert.equal(code, "answer_too_large");
    assert.equal(data.tool, "rows.list");
    assert.equal(data.tokens, countTokens(JSON.stringify(value)));
    assert.match(message, /rows\.list.*past the budget of 1500 tokens/);
    assert.ok(tokensRead(first) + countTokens(JSON.stringify(first.structuredContent)) <= 1_500);
    const again = pages.page({ cursor: data.cursor }, "one");
    assert.deepEqual(body(again), body(first));
    assert.equal(cursorOf(again), cursorOf(first));
    assert.deepEqual(JSON.parse(joinedText(readAll(pages, again, "one"))), value);
  });

  it("names an answer too large to keep: no cursor, ask the tool for less", () => {
    const pages = createResultPages({ budget: 1_500, maxBytes: 1_000 });
    const first = pages.fit(
      { content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: value },
      "one",
      declared,
    );
    assert.equal(error(first).data.cursor, undefined);
    assert.match(error(first).message, /too large to keep for paging .*ask the tool for less/);
  });

  it("leaves an error's own structured content and a tool without a schema as before", () => {
    const pages = createResultPages({ budget: 1_500 });
    const plain = pages.fit(
      { content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: value },
      "one",
      { tool: "rows.list" },
    );
    assert.equal(plain.isError, undefined);
    assert.equal(plain.structuredContent, undefined);
    const failed = pages.fit(
      { isError: true, content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: value },
      "one",
      declared,
    );
    assert.equal(failed.isError, true);
    assert.equal(failed.structuredContent, undefined);
  });
});

describe("result pages: images, cursors and bounds", () => {
  it("counts an image as a fixed cost, never tokenizes its base64, and never cuts one", () => {
    const pages = createResultPages({ budget: 2_000 });
    const image: Block = { type: "image", data: "A".repeat(3_000_000), mimeType: "image/png" };
    const withImage: CallToolResult = { content: [{ type: "text", text: "a chart" }, image] };
    assert.equal(pages.fit(withImage, "one"), withImage);
    const many: CallToolResult = { content: [image, image, image, { type: "text", text: "the end" }] };
    const parts = readAll(pages, pages.fit(many, "one"), "one");
    const images = parts.flatMap((part) => body(part).filter((block) => block.type === "image"));
    assert.equal(images.length, 3);
    for (const block of images) assert.equal(block, image);
    assert.equal(parts.length, 3);
  });

  it("never splits a surrogate pair when a text has no boundary at all", () => {
    const pages = createResultPages({ budget: 1_500 });
    const text = "😀".repeat(20_000);
    const parts = readAll(pages, pages.fit({ content: [{ type: "text", text }] }, "one"), "one");
    for (const part of parts) {
      const piece = (body(part)[0] as { text: string }).text;
      assert.equal(piece.length % 2, 0);
    }
    assert.equal(joinedText(parts), text);
  });

  it("refuses a cursor to another owner, a made-up one and a malformed one, saying how to recover", () => {
    const pages = createResultPages({ budget: 1_500 });
    const first = pages.fit({ content: [{ type: "text", text: "x y ".repeat(20_000) }] }, "alice");
    const cursor = cursorOf(first) as string;
    for (const [args, owner] of [
      [{ cursor }, "mallory"],
      [{ cursor: `${"A".repeat(22)}.1` }, "alice"],
      [{ cursor: `${cursor.split(".")[0]}.99` }, "alice"],
    ] as const) {
      const refused = pages.page(args, owner);
      assert.equal(refused.isError, true);
      const { error } = refused.structuredContent as { error: { code: string; data: { resource: string } } };
      assert.deepEqual([error.code, error.data.resource], ["not_found", "cursor"]);
      assert.match(
        (refused.content[0] as { text: string }).text,
        /read only with the credential that received it/,
      );
    }
    assert.equal(
      (pages.page({}, "alice").structuredContent as { error: { code: string } }).error.code,
      "invalid_input",
    );
    assert.notEqual(pages.page({ cursor }, "alice").isError, true);
    pages.forget("alice");
    assert.equal(pages.page({ cursor }, "alice").isError, true);
  });

  it("keeps what it holds bounded: entries, bytes and time", async () => {
    const long = (tag: string) => ({ content: [{ type: "text" as const, text: `${tag} `.repeat(10_000) }] });
    const counted = createResultPages({ budget: 1_500, maxEntries: 2 });
    const cursors = ["a", "b", "c"].map((tag) => cursorOf(counted.fit(long(tag), "one")) as string);
    assert.deepEqual(counted.kept().entries, 2);
    assert.equal(counted.page({ cursor: cursors[0] }, "one").isError, true, "the oldest was not dropped");
    assert.notEqual(counted.page({ cursor: cursors[2] }, "one").isError, true);

    const small = createResultPages({ budget: 1_500, maxBytes: 10_000 });
    const refused = small.fit(long("big"), "one");
    assert.equal(cursorOf(refused), undefined);
    assert.match((refused.content.at(-1) as { text: string }).text, /too large to keep for paging/);
    assert.equal(small.kept().entries, 0);

    const brief = createResultPages({ budget: 1_500, ttlMs: 50 });
    const cursor = cursorOf(brief.fit(long("soon"), "one")) as string;
    await new Promise((resolve) => setTimeout(resolve, 80));
    assert.equal(brief.page({ cursor }, "one").isError, true);
    assert.equal(brief.kept().entries, 0);
  });

  it("estimates the total of a long answer from a sample of it, rather than stall counting it", () => {
    const pages = createResultPages();
    const text = "a few words on a line\n".repeat(200_000);
    const first = pages.fit({ content: [{ type: "text", text }] }, "one");
    const exact = countSliced(text);
    const said = /characters of text, about (\d+) tokens/.exec(
      (first.content.at(-1) as { text: string }).text,
    );
    assert.ok(said !== null, "the total is marked as estimated");
    assert.ok(Math.abs(Number(said[1]) - exact) / exact < 0.02, `${said[1]} against ${exact}`);
  });

  it("bounds what a long answer without spaces costs to cut: 4 million base64 characters on one line", () => {
    // Counted whole, such an answer held the loop 49 s at load 10 on 2 cores (10 s quiet): the
    // summary counted every character. Its estimate comes from the density, so is near the count
    // (4 characters a token would be off by more than 2.5 times: base64 is ~1.45 a token).
    const pages = createResultPages();
    const text = randomBytes(3_000_000).toString("base64");
    const started = performance.now();
    const first = pages.fit({ content: [{ type: "text", text }] }, "one");
    const elapsed = performance.now() - started;
    const said = /characters of text, about (\d+) tokens/.exec(
      (first.content.at(-1) as { text: string }).text,
    );
    assert.ok(said !== null);
    const sampleDensity = 400_000 / countSliced(text.slice(0, 400_000));
    const expected = text.length / sampleDensity;
    assert.ok(Math.abs(Number(said[1]) - expected) / expected < 0.05, `${said[1]} against ${expected}`);
    // Its cost as a ratio, so load cannot fail it: a cut and the estimate count a few hundred thousand
    // characters, where the whole count was forty times a 100,000-character count.
    const counting = performance.now();
    countSliced(text.slice(1_000_000, 1_100_000));
    const perHundredThousand = performance.now() - counting;
    assert.ok(
      elapsed < 12 * perHundredThousand,
      `cut in ${Math.round(elapsed)} ms; 100,000 characters counted in ${Math.round(perHundredThousand)} ms`,
    );
  });

  it("refuses a budget too small to hold a summary", () => {
    assert.throws(() => createResultPages({ budget: 100 }), /at least 1500/);
  });
});
