/**
 * A process that creates one large document in a SQLite file and is killed by its parent while the
 * rows are written (`large-create.test.ts`). Args: the file, the document id, the clips, the claim's
 * lease in ms (ADR 0562).
 */
import { DocumentHost } from "../src/server/document-host.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline } from "./large-timeline.ts";

const [path = "", documentId = "", clips = "0", leaseMs] = process.argv.slice(2);
const store = createSqliteDocumentStore({
  path,
  ...(leaseMs === undefined ? {} : { claimLeaseMs: Number(leaseMs) }),
});
const host = new DocumentHost({ store, schema: timelineSchema });
await host.create(documentId, "token-large-create-0123456789", largeTimeline(Number(clips)).snapshot);
process.stdout.write("created\n");
await store.close();
