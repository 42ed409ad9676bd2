/**
 * `claimLeaseMs` (ADR 0562) is checked when the SQLite store is made: a value that is no positive whole
 * number of ms is refused with a `RangeError` naming the option and the value, before the file is
 * opened (nothing is created); a good value, and none (the default), make a store that creates.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import { DocumentHost } from "../src/server/document-host.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";

const directory = await mkdtemp(join(tmpdir(), "docscript-claim-lease-"));
after(() => rm(directory, { recursive: true, force: true }));

const bad: readonly [string, unknown][] = [
  ["zero", 0],
  ["negative", -1_000],
  ["a fraction", 1.5],
  ["NaN", Number.NaN],
  ["infinite", Number.POSITIVE_INFINITY],
  ["negative infinity", Number.NEGATIVE_INFINITY],
  ["a numeric string", "1000"],
  ["a boolean", true],
];

describe("the SQLite store's claimLeaseMs option", () => {
  for (const [name, value] of bad)
    it(`refuses ${name} with a RangeError naming the option, and opens no file`, () => {
      const path = join(directory, `bad-${name.replaceAll(" ", "-")}.sqlite`);
      assert.throws(
        () => createSqliteDocumentStore({ path, claimLeaseMs: value as number }),
        (error: unknown) => {
          assert.ok(error instanceof RangeError, `${String(error)} is a RangeError`);
          assert.match(error.message, /^claimLeaseMs must be a positive whole number of ms, not /);
          assert.ok(error.message.endsWith(String(value)), error.message);
          return true;
        },
      );
      assert.equal(existsSync(path), false, "the file was not opened");
    });

  for (const [name, claimLeaseMs] of [
    ["one ms", 1],
    ["the default", undefined],
    ["a day", 86_400_000],
  ] as const)
    it(`takes ${name} and creates documents`, async () => {
      const path = join(directory, `good-${name.replaceAll(" ", "-")}.sqlite`);
      const store = createSqliteDocumentStore({
        path,
        ...(claimLeaseMs === undefined ? {} : { claimLeaseMs }),
      });
      const host = new DocumentHost({ store, schema: timelineSchema });
      try {
        assert.equal(
          await host.create("doc", "token-claim-lease-0123456789", sampleTimelineSnapshot()),
          true,
        );
      } finally {
        await host.close();
        await store.close();
      }
    });
});
