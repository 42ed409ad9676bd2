/**
 * A process of `shared-file-creates.property.test.ts`: one SQLite document store on the shared file
 * (args: the file, the claims' lease in ms), answering its parent's asks over IPC, several at once:
 * creates of `largeTimeline(clips)`, reads, and commits of a track named by a marker. A create's answer
 * says how late the event loop ran while the store held its claim (from `createDocument`'s call to its
 * end: the slices renew the lease no more often than the loop runs), so the parent can tell a create
 * stalled past its lease from one whose claim another process took back.
 */
import { LoroDoc } from "loro-crdt";
import { openDocument } from "../src/document/document-session.ts";
import { DocumentHost } from "../src/server/document-host.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline } from "./large-timeline.ts";
import { type Answer, type Ask, token } from "./shared-file-processes.ts";

const [path = "", leaseMs = "15000"] = process.argv.slice(2);
const sqlite = createSqliteDocumentStore({ path, claimLeaseMs: Number(leaseMs) });

// The event loop's lateness, the worst since each window opened; a create's, by its id, once ended.
const windows = new Map<symbol, number>();
const claimLagMs = new Map<string, number>();
let last = performance.now();
setInterval(() => {
  const now = performance.now();
  const late = now - last - 10;
  last = now;
  for (const [window, worst] of windows) if (late > worst) windows.set(window, late);
}, 10);

const store: DocumentStore = {
  ...sqlite,
  createDocument(input) {
    const window = Symbol(input.documentId);
    windows.set(window, 0);
    return sqlite.createDocument(input).finally(() => {
      claimLagMs.set(
        input.documentId,
        Math.max(claimLagMs.get(input.documentId) ?? 0, windows.get(window) ?? 0),
      );
      windows.delete(window);
    });
  },
};
const host = new DocumentHost({ store, schema: timelineSchema });
let peers = 1 + Math.floor(Math.random() * 1e9);

async function answer(ask: Ask): Promise<Answer["value"]> {
  if (ask.op === "create") return await host.create(ask.id, token, largeTimeline(ask.clips).snapshot);
  if (ask.op === "read") {
    if ((await host.authorize(ask.id, token)) !== "ok") return undefined;
    const doc = LoroDoc.fromSnapshot((await host.snapshot(ask.id)).bytes);
    return Object.keys(doc.getMap("entities").toJSON()).length;
  }
  const doc = LoroDoc.fromSnapshot((await host.snapshot(ask.id)).bytes);
  doc.setPeerId(peers++);
  const from = doc.oplogVersion();
  openDocument(doc, timelineSchema).entities.create({
    entityKind: "track",
    entityId: ask.marker,
    payload: { role: "bgm", name: ask.marker },
  });
  doc.commit();
  return (await host.push(ask.id, doc.export({ mode: "update", from }), {})).status;
}

process.on("message", (ask: Ask) => {
  const settle = (reply: Omit<Answer, "lagMs">) => {
    const lagMs = ask.op === "create" ? (claimLagMs.get(ask.id) ?? 0) : 0;
    if (ask.op === "create") claimLagMs.delete(ask.id);
    process.send?.({ ...reply, lagMs });
  };
  answer(ask).then(
    (value) => settle({ n: ask.n, value }),
    (error: unknown) => settle({ n: ask.n, error: String((error as Error)?.message ?? error) }),
  );
});
process.send?.({ n: 0, value: "ready", lagMs: 0 });
