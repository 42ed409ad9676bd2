/**
 * A snapshot page asked for kinds named like what a plain object inherits ("constructor", "toString",
 * "__proto__") counts them as kinds the document has none of: its `matched` and `remaining` stay
 * numbers, never Object's function turned into text.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { createToolSet, silentLogger } from "@tackle/core";
import docscriptBundle, { sampleDocumentId } from "../module/bundle.ts";

test("a snapshot page counts kinds named like inherited properties as kinds with no rows", async () => {
  const bundle = await docscriptBundle({
    module: "docscript",
    node: "test-node",
    env: {},
    logger: silentLogger,
  });
  try {
    const tools = createToolSet(bundle.tools);
    const pages: [Record<string, unknown>, { entities: number; relations: number }][] = [
      [
        { kinds: ["constructor"], include: "entities" },
        { entities: 0, relations: 0 },
      ],
      [
        { kinds: ["__proto__"], include: "entities" },
        { entities: 0, relations: 0 },
      ],
      [
        { kinds: ["toString", "clip"], include: "entities" },
        { entities: 3, relations: 0 },
      ],
      [
        { relation_kinds: ["valueOf"], include: "relations" },
        { entities: 0, relations: 0 },
      ],
      [
        { relation_kinds: ["hasOwnProperty", "contain"], include: "relations" },
        { entities: 0, relations: 6 },
      ],
    ];
    for (const [query, matched] of pages) {
      const page = await tools.call("edit", { op: "snapshot", doc_id: sampleDocumentId, ...query });
      assert.ok(page.ok, JSON.stringify(page));
      const output = page.output as unknown as {
        matched: unknown;
        remaining: unknown;
        entities: unknown[];
        relations: unknown[];
      };
      assert.deepEqual(output.matched, matched, JSON.stringify(query));
      assert.deepEqual(output.remaining, { entities: 0, relations: 0 }, JSON.stringify(query));
      assert.equal(output.entities.length, matched.entities);
      assert.equal(output.relations.length, matched.relations);
    }
  } finally {
    await bundle.close();
  }
});
