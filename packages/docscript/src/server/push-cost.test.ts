/**
 * "A push is checked without re-importing the whole document each time". Watched at Loro's own
 * seams while one push to a ~1k-entity document is checked and stored: the bytes Loro imports, any
 * snapshot made or read, any fork, and the largest map read in one call (a full projection reads every
 * row of the entities map at once).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { LoroDoc, LoroMap } from "loro-crdt";
import { openDocument } from "../document/document-session.ts";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { DocumentHost } from "./document-host.ts";
import type { DocumentStore } from "./document-store.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

interface LoroWork {
  importedBytes: number;
  snapshotsExported: number;
  snapshotsRead: number;
  forks: number;
  /** The most keys one map read returned. */
  widestRead: number;
}

/** Runs `work` with Loro's import, export, fork and whole-map reads counted; puts everything back after. */
async function watchLoro(work: () => Promise<void>): Promise<LoroWork> {
  const seen: LoroWork = {
    importedBytes: 0,
    snapshotsExported: 0,
    snapshotsRead: 0,
    forks: 0,
    widestRead: 0,
  };
  const docPrototype = LoroDoc.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const mapPrototype = LoroMap.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const statics = LoroDoc as unknown as Record<string, (...args: unknown[]) => unknown>;
  const restore: (() => void)[] = [];
  const wrap = (
    owner: Record<string, (...args: unknown[]) => unknown>,
    name: string,
    count: (args: unknown[], result: unknown) => void,
  ) => {
    const original = owner[name];
    if (typeof original !== "function") throw new Error(`loro-crdt has no ${name} to watch`);
    owner[name] = function (this: unknown, ...args: unknown[]) {
      const result = original.apply(this, args);
      count(args, result);
      return result;
    };
    restore.push(() => {
      owner[name] = original;
    });
  };
  const size = (bytes: unknown) => (bytes instanceof Uint8Array ? bytes.byteLength : 0);
  const widest = (value: unknown) => {
    const record = (value as { value?: unknown })?.value ?? value;
    if (typeof record === "object" && record !== null)
      seen.widestRead = Math.max(seen.widestRead, Object.keys(record).length);
  };
  wrap(docPrototype, "import", ([bytes]) => {
    seen.importedBytes += size(bytes);
  });
  wrap(docPrototype, "importBatch", ([batch]) => {
    for (const bytes of batch as Uint8Array[]) seen.importedBytes += size(bytes);
  });
  wrap(docPrototype, "export", ([mode]) => {
    if ((mode as { mode?: string })?.mode !== "update") seen.snapshotsExported++;
  });
  wrap(docPrototype, "fork", () => {
    seen.forks++;
  });
  wrap(docPrototype, "forkAt", () => {
    seen.forks++;
  });
  wrap(statics, "fromSnapshot", ([bytes]) => {
    seen.snapshotsRead++;
    seen.importedBytes += size(bytes);
  });
  for (const name of ["toJSON", "getDeepValueWithID", "getShallowValue"]) {
    wrap(docPrototype, name, (_args, result) => widest(result));
    wrap(mapPrototype, name, (_args, result) => widest(result));
  }
  try {
    await work();
  } finally {
    for (const undo of restore.reverse()) undo();
  }
  return seen;
}

test("a push to a ~1k-entity document imports only its update: no snapshot, no fork, no full read", async () => {
  const host = new DocumentHost({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
  });
  try {
    const snapshot = sampleTimelineSnapshot({ extraClips: 330 });
    assert.equal(await host.create("big", "token-0123456789abcdef", snapshot), true);
    const client = LoroDoc.fromSnapshot((await host.snapshot("big")).bytes);
    const session = openDocument(client, timelineSchema, { role: "host" });
    assert.ok(session.entities.list({}).length >= 1000, "the document holds about 1k entities");
    const [caption] = session.entities.list({ entityKind: "caption" });
    assert.ok(caption !== undefined);

    /** One small edit (a caption gains "!"), exported as the update a client pushes. */
    const nextUpdate = () => {
      const from = client.oplogVersion();
      const text = String(session.entities.get(caption.entityId)?.payload.text ?? "");
      session.entities.update(caption.entityId, [
        { op: "splice", path: ["text"], index: [...text].length, insert: "!" },
      ]);
      client.commit();
      return client.export({ mode: "update", from });
    };

    // The first push opens the document (rows read from the store) and makes its fork: a one-time cost.
    const first = await host.push("big", nextUpdate());
    assert.equal(first.status, "committed", JSON.stringify(first));

    for (let push = 0; push < 3; push++) {
      const update = nextUpdate();
      let result: Awaited<ReturnType<DocumentHost["push"]>> | undefined;
      const work = await watchLoro(async () => {
        result = await host.push("big", update);
      });
      assert.equal(result?.status, "committed", JSON.stringify(result));
      // The update goes into the fork and then into the live document: twice its size, nothing more.
      assert.ok(
        work.importedBytes <= 2 * update.byteLength,
        `imported ${work.importedBytes} bytes for a ${update.byteLength}-byte update (snapshot ${snapshot.byteLength})`,
      );
      assert.ok(work.importedBytes > 0, "the push imported nothing: the spy is not watching the host");
      assert.ok(update.byteLength * 50 < snapshot.byteLength, "the update is far smaller than the document");
      assert.equal(work.snapshotsExported, 0, "a push exported a snapshot");
      assert.equal(work.snapshotsRead, 0, "a push read a snapshot");
      assert.equal(work.forks, 0, "a push forked the whole document");
      assert.ok(work.widestRead < 50, `a push read ${work.widestRead} rows at once (a full projection)`);
    }
    const read = new LoroDoc();
    read.import((await host.snapshot("big")).bytes);
    const stored = openDocument(read, timelineSchema, { role: "host" }).entities.get(caption.entityId);
    assert.match(String(stored?.payload.text), /!!!!$/, "every push was stored");
  } finally {
    await host.close();
  }
});

test("opening a ~1k-entity document, a page of it and its first push read no whole map: rows come from the store", async () => {
  const host = new DocumentHost({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
  });
  try {
    const snapshot = sampleTimelineSnapshot({ extraClips: 330 });
    assert.equal(await host.create("big", "token-0123456789abcdef", snapshot), true);
    const client = LoroDoc.fromSnapshot(snapshot);
    const session = openDocument(client, timelineSchema, { role: "host" });
    const [caption] = session.entities.list({ entityKind: "caption" });
    assert.ok(caption !== undefined);
    const from = client.oplogVersion();
    session.entities.update(caption.entityId, [{ op: "splice", path: ["text"], index: 0, insert: "¡" }]);
    client.commit();
    const update = client.export({ mode: "update", from });

    host.forget();
    let page: Awaited<ReturnType<DocumentHost["entityPage"]>> | undefined;
    let result: Awaited<ReturnType<DocumentHost["push"]>> | undefined;
    const work = await watchLoro(async () => {
      page = await host.entityPage("big", { kinds: ["clip"], limit: 5 });
      result = await host.push("big", update);
    });
    assert.equal(result?.status, "committed", JSON.stringify(result));
    assert.equal(page?.entities.length, 5);
    assert.ok(page?.entities.every((entity) => entity.entityKind === "clip"));
    assert.ok((page?.total.entities ?? 0) >= 1000, `total ${page?.total.entities}`);
    assert.ok(work.snapshotsRead > 0, "the document was not opened inside the watch");
    assert.ok(work.widestRead < 50, `read ${work.widestRead} rows at once (a full projection)`);
    const after = await host.entityPage("big", { ids: [caption.entityId], limit: 1 });
    assert.match(String(after.entities[0]?.payload.text), /^¡/, "the page reads the pushed row");
  } finally {
    await host.close();
  }
});

/** A store that counts the rows its reads return (rows and members with their rows). */
function countingStore(store: DocumentStore): { store: DocumentStore; rowsRead: () => number } {
  let read = 0;
  const counted: DocumentStore = {
    ...store,
    readRows: async (documentId, query) => {
      const rows = await store.readRows(documentId, query);
      read += rows.length;
      return rows;
    },
    readMembers: async (documentId, query) => {
      const members = await store.readMembers(documentId, query);
      read += members.length;
      return members;
    },
  };
  return { store: counted, rowsRead: () => read };
}

/**
 * A host over a counting SQLite store in a scratch directory, holding the sample timeline with 330 clips
 * more as "big", and a host session on a replica of it.
 */
async function countedBig(prefix: string) {
  const directory = mkdtempSync(join(tmpdir(), prefix));
  const { store, rowsRead } = countingStore(createSqliteDocumentStore({ path: join(directory, "d.sqlite") }));
  const host = new DocumentHost({ store, schema: timelineSchema });
  const snapshot = sampleTimelineSnapshot({ extraClips: 330 });
  assert.equal(await host.create("big", "token-0123456789abcdef", snapshot), true);
  const client = LoroDoc.fromSnapshot(snapshot);
  const session = openDocument(client, timelineSchema, { role: "host" });
  const close = async () => {
    await host.close();
    rmSync(directory, { recursive: true, force: true });
  };
  return { host, rowsRead, client, session, close };
}

test("the first push after a ~1k-entity document opens reads the rows its checks reach, not the document's", async () => {
  const { host, rowsRead, client, session, close } = await countedBig("tackle-docscript-push-reads-");
  try {
    const clips = session.entities.list({ entityKind: "clip" });
    const images = session.entities.list({ entityKind: "image" });
    assert.ok(clips.length > 300 && images.length > 300);
    const edit = (change: () => void) => {
      const from = client.oplogVersion();
      change();
      client.commit();
      return client.export({ mode: "update", from });
    };

    // A clip on the video track (which holds 330 clips) changes its volume: the clip's row, its
    // content and track, and their relations are read; not the track's other clips.
    host.forget();
    const before = rowsRead();
    const volume = edit(() =>
      session.entities.update(clips[5]?.entityId ?? "", [{ op: "set", path: ["volume"], value: -6 }]),
    );
    const committed = await host.push("big", volume);
    assert.equal(committed.status, "committed", JSON.stringify(committed));
    const read = rowsRead() - before;
    assert.ok(read > 0, "the push read nothing from the store: the counter is not watching it");
    assert.ok(
      read < 40,
      `the first push read ${read} rows of a ${clips.length + images.length}-row document`,
    );

    // Checks still see what they reach beyond the pushed rows, read from the store on a fresh open: a
    // second image for the same file as one the push never touched clashes with it.
    host.forget();
    const taken = images[7];
    assert.ok(taken !== undefined);
    // Written as a raw row: the session would find the image already standing for that file.
    const twin = edit(() => {
      const row = client.getMap("entities").setContainer("image-twin", new LoroMap());
      row.set("kind", "image");
      const fields = row.setContainer("fields", new LoroMap());
      for (const [name, value] of Object.entries({ ...taken.payload, storageKey: null, digest: null }))
        fields.set(name, value as never);
    });
    const refused = await host.push("big", twin);
    assert.equal(refused.status, "rejected", JSON.stringify(refused));
    assert.ok(
      refused.status === "rejected" &&
        refused.issues.some(
          (issue) => issue.constraint === "entity.identity" && issue.message.includes(taken.entityId),
        ),
      JSON.stringify(refused),
    );

    // And a relation to an entity that exists only in the store's rows is accepted after a fresh open.
    host.forget();
    const other = LoroDoc.fromSnapshot((await host.snapshot("big")).bytes);
    const otherSession = openDocument(other, timelineSchema, { role: "host" });
    const from = other.oplogVersion();
    const script = otherSession.entities.create({
      entityKind: "audio-script",
      payload: { segments: [], transcription: null },
    });
    otherSession.relations.link({
      relationKind: "derived-from",
      endpoint0EntityId: script.entityId,
      endpoint1EntityId: images[9]?.entityId ?? "",
    });
    other.commit();
    host.forget();
    const linked = await host.push("big", other.export({ mode: "update", from }));
    assert.equal(linked.status, "committed", JSON.stringify(linked));
  } finally {
    await close();
  }
});

test("rows the server read for a tool's window page are held for the push that writes them (ADR 0515)", async () => {
  const { host, rowsRead, client, session, close } = await countedBig("tackle-docscript-served-rows-");
  try {
    const clips = session.entities.list({ entityKind: "clip" });
    const [first, ...rest] = clips;
    assert.ok(first !== undefined && rest.length >= 330);
    /** Sets the volume of `of`, pushed as one update: the rows the push read from the store. */
    const pushVolumes = async (of: readonly { entityId: string }[], volume: number) => {
      const from = client.oplogVersion();
      for (const clip of of)
        session.entities.update(clip.entityId, [{ op: "set", path: ["volume"], value: volume }]);
      client.commit();
      const before = rowsRead();
      const outcome = await host.push("big", client.export({ mode: "update", from }));
      assert.equal(outcome.status, "committed", JSON.stringify(outcome));
      return rowsRead() - before;
    };
    /** The window of every clip's volume, as a tool's listing reads it: the rows it read. */
    const window = async () => {
      const before = rowsRead();
      const answer = await host.rowLookup("big", [
        { members: "entity", kinds: ["clip"], range: { field: "volume" }, limit: 5000, claims: true },
      ]);
      assert.equal(answer.results[0]?.found, clips.length);
      return rowsRead() - before;
    };

    // Each round: the document opened afresh by a push of one clip, the window read, then a push of
    // the other clips' volumes, as a tool's run writes the clips its listing found.
    host.forget();
    await pushVolumes([first], -1);
    assert.ok((await window()) >= clips.length, "the window read its clips");
    const held = await pushVolumes(rest, -2);

    // Without the window, the same push reads each clip's row itself.
    host.forget();
    await pushVolumes([first], -3);
    const unheld = await pushVolumes(rest, -4);
    // Every clip's row (and its claim) the window brought was not read again by the push's checks.
    assert.ok(
      unheld - held >= rest.length,
      `with the window the push read ${held} rows, without it ${unheld}, writing ${rest.length} clips`,
    );
    // Answered from the store as the pushes left it, with its rows held again.
    await window();
    const [row] =
      (await host.rowLookup("big", [{ rows: "entities", ids: [rest[7]?.entityId ?? ""] }])).results[0]
        ?.rows ?? [];
    assert.equal((row?.json as { fields?: { volume?: number } } | undefined)?.fields?.volume, -4);
  } finally {
    await close();
  }
});
