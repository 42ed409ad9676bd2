/**
 * The push check alone: a timeline of N entities stored with its rows (as a server creates it), a
 * `DocumentHost` over the SQLite file, and 21 pushes of one clip change from another peer. Prints the
 * first push (it opens the document's projection from the store's rows and makes the fork) and the p50
 * of the rest.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/push-alone.ts [entities]   # 100000
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LoroDoc, type LoroMap } from "loro-crdt";
import { checkDocument } from "../../packages/docscript/src/document/check-document.ts";
import { projectDocument } from "../../packages/docscript/src/document/interpret.ts";
import {
  createSqliteDocumentStore,
  DocumentHost,
  hashToken,
} from "../../packages/docscript/src/server/index.ts";
import { allRowChanges } from "../../packages/docscript/src/server/row-members.ts";
import { timelineSchema } from "../../packages/docscript/src/timeline/timeline-schema.ts";
import { largeTimeline } from "../../packages/docscript/test/large-timeline.ts";

const count = Number(process.argv[2] ?? 100000);
const dir = mkdtempSync(join(tmpdir(), "push-alone-"));
try {
  const { snapshot, firstClips } = largeTimeline(Math.round((count - 12) / 3));
  const path = join(dir, "d.sqlite");
  const seed = createSqliteDocumentStore({ path });
  const projection = projectDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema);
  await seed.createDocument({
    documentId: "bench",
    tokenHash: hashToken("t"),
    snapshot,
    rows: allRowChanges(projection),
    issues: checkDocument(projection),
  });
  await seed.close();
  const host = new DocumentHost({ store: createSqliteDocumentStore({ path }), schema: timelineSchema });
  const other = LoroDoc.fromSnapshot(snapshot);
  other.setPeerId(9);
  const samples: number[] = [];
  for (let index = 0; index < 21; index++) {
    const before = other.oplogVersion();
    (
      (other.getMap("entities").get(firstClips[index % firstClips.length]!) as LoroMap).get(
        "fields",
      ) as LoroMap
    ).set("speed", 1 + (index % 9) / 10);
    other.commit();
    const update = other.export({ mode: "update", from: before });
    const started = performance.now();
    const result = await host.push("bench", update);
    samples.push(performance.now() - started);
    if (result.status !== "committed") throw new Error(result.status);
  }
  const rest = samples.slice(1).sort((a, b) => a - b);
  console.log(
    `${count}: first push ${samples[0]!.toFixed(0)} ms, p50 of the rest ${rest[Math.floor(rest.length / 2)]!.toFixed(1)} ms`,
  );
  await host.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
