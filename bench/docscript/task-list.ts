/**
 * The tasks of the tasks bench (`tasks.ts`): each an editor's edit as the script a model would write,
 * and the same edits straight to Loro (the baseline, run on a replica of the seeded document in a
 * thread of its own: `task-baseline.ts`).
 */
import { type LoroDoc, LoroMap, LoroText } from "loro-crdt";

/** Every tenth clip is on the overlay track (`largeTimeline(n, 10)`). */
export const overlayEvery = 10;
const shiftFromMs = 30_000;

export interface Task {
  readonly name: string;
  /** The script a model would write for it. */
  readonly script: string;
  /** The same edits straight to Loro: the replica's `entities` and `relations` maps. */
  readonly loro: (doc: LoroDoc) => void;
}

const entitiesOf = (doc: LoroDoc) => doc.getMap("entities");
const relationsOf = (doc: LoroDoc) => doc.getMap("relations");
const fieldsOf = (row: LoroMap) => row.get("fields") as LoroMap;
let made = 0;
const newId = (kind: string) => `${kind}-bench${made++}`;

/** A clip row as the document stores it: marker and content in its slots. */
function writeClip(doc: LoroDoc, trackId: string, contentId: string, startMs: number, position: string) {
  const clipId = newId("clip");
  const row = entitiesOf(doc).setContainer(clipId, new LoroMap());
  row.set("kind", "clip");
  const fields = row.setContainer("fields", new LoroMap());
  fields.set("name", null);
  fields.set("volume", 0);
  fields.set("speed", 1);
  const slots = row.setContainer("slots", new LoroMap());
  slots.set("content", contentId);
  const marker = slots.setContainer("marker", new LoroMap());
  marker.set("id", newId("sequence-marker"));
  marker.set("kind", "sequence-marker");
  const markerFields = marker.setContainer("fields", new LoroMap());
  markerFields.set("startMs", startMs);
  markerFields.set("durationMs", 1500);
  markerFields.set("trimStartMs", 0);
  const contain = relationsOf(doc).setContainer(newId("contain"), new LoroMap());
  contain.set("kind", "contain");
  contain.set("endpoint0", trackId);
  contain.set("endpoint1", clipId);
  contain.set("position", position);
}

/** A caption row as the document stores it, with its defaults; its id. */
function writeCaption(doc: LoroDoc, text: string): string {
  const captionId = newId("caption");
  const row = entitiesOf(doc).setContainer(captionId, new LoroMap());
  row.set("kind", "caption");
  const fields = row.setContainer("fields", new LoroMap());
  fields.setContainer("text", new LoroText()).insert(0, text);
  fields.set("durationMs", null);
  const style = fields.setContainer("style", new LoroMap());
  style.set("position", "bottom");
  style.set("fontSize", 32);
  fields.set("language", null);
  return captionId;
}

const captionTimes = [1_000, 5_000, 9_000, 13_000, 17_000];

export const tasks: readonly Task[] = [
  {
    name: "add five captions at given times",
    script: `const track = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'caption');
for (const [at, text] of ${JSON.stringify(captionTimes.map((at, index) => [at, `Line ${index + 1}`]))}) {
  const caption = entities.create({ entityKind: 'caption', payload: { text } });
  const clip = entities.create({ entityKind: 'clip' });
  const marker = entities.create({ entityKind: 'sequence-marker', payload: { startMs: at, durationMs: 1500 } });
  relations.link({ relationKind: 'marker', endpoint0EntityId: clip.entityId, endpoint1EntityId: marker.entityId });
  relations.link({ relationKind: 'contain', endpoint0EntityId: clip.entityId, endpoint1EntityId: caption.entityId });
  relations.link({ relationKind: 'contain', endpoint0EntityId: track.entityId, endpoint1EntityId: clip.entityId });
}`,
    loro(doc) {
      for (const [index, at] of captionTimes.entries()) {
        writeClip(doc, "track-3", writeCaption(doc, `Line ${index + 1}`), at, `~zz${index}`);
      }
    },
  },
  {
    name: `shift every clip from ${shiftFromMs / 1000} s by 2 s`,
    script: `let after;
for (;;) {
  const page = entities.list({ entityKind: 'sequence-marker', range: { field: 'startMs', from: ${shiftFromMs} }, limit: 5000, after });
  if (page.length === 0) break;
  entities.updateMany(page.map((m) => ({ entityId: m.entityId, ops: [{ op: 'set', path: ['startMs'], value: m.payload.startMs + 2000 }] })));
  after = page[page.length - 1].entityId;
}`,
    loro(doc) {
      for (const rowId of entitiesOf(doc).keys()) {
        const row = entitiesOf(doc).get(rowId) as LoroMap;
        const marker = (row.get("slots") as LoroMap | undefined)?.get("marker");
        if (!(marker instanceof LoroMap)) continue;
        const fields = fieldsOf(marker);
        const start = fields.get("startMs") as number;
        if (start >= shiftFromMs) fields.set("startMs", start + 2000);
      }
    },
  },
  {
    name: "delete a medium and what only it uses",
    script: `const mediumId = 'large-image-7';
for (const shown of relations.of(mediumId, 'contain')) entities.delete(shown.endpoint0EntityId); // its clips, markers with them
for (const other of relations.of(mediumId)) relations.unlink(other.relationId);
entities.delete(mediumId);`,
    loro(doc) {
      entitiesOf(doc).delete("large-clip-7");
      relationsOf(doc).delete("large-contain-7");
      entitiesOf(doc).delete("large-image-7");
    },
  },
  {
    name: "retime one caption",
    script: `const hello = entities.list({ entityKind: 'caption' }).find((c) => c.payload.text === 'Hello');
const [shownBy] = relations.of(hello.entityId, 'contain');
const [marker] = relations.of(shownBy.endpoint0EntityId, 'marker');
entities.update(marker.endpoint1EntityId, [{ op: 'set', path: ['startMs'], value: 1500 }]);`,
    loro(doc) {
      for (const rowId of entitiesOf(doc).keys()) {
        const row = entitiesOf(doc).get(rowId) as LoroMap;
        if (row.get("kind") !== "clip") continue;
        const slots = row.get("slots") as LoroMap;
        if (slots.get("content") !== "caption-1") continue;
        fieldsOf(slots.get("marker") as LoroMap).set("startMs", 1500);
        break;
      }
    },
  },
  {
    name: "append a clip to the overlay track (a tenth of all clips)",
    script: `const overlay = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'overlay');
const logo = entities.create({ entityKind: 'image', payload: { system: 'files', key: 'logo.png', name: 'Logo' } });
const clip = entities.create({ entityKind: 'clip' });
const marker = entities.create({ entityKind: 'sequence-marker', payload: { startMs: 0, durationMs: 3000 } });
relations.link({ relationKind: 'marker', endpoint0EntityId: clip.entityId, endpoint1EntityId: marker.entityId });
relations.link({ relationKind: 'contain', endpoint0EntityId: clip.entityId, endpoint1EntityId: logo.entityId });
relations.link({ relationKind: 'contain', endpoint0EntityId: overlay.entityId, endpoint1EntityId: clip.entityId });`,
    loro(doc) {
      const logoId = newId("image");
      const row = entitiesOf(doc).setContainer(logoId, new LoroMap());
      row.set("kind", "image");
      const fields = row.setContainer("fields", new LoroMap());
      for (const [name, value] of Object.entries({
        system: "files",
        key: "logo.png",
        name: "Logo",
        durationMs: null,
        storageKey: null,
        digest: null,
      }))
        fields.set(name, value);
      writeClip(doc, "large-track-overlay", logoId, 0, "~zzzzzz");
    },
  },
  {
    name: "mute the clips playing from 60 s to 70 s",
    script: `const markers = entities.list({ entityKind: 'sequence-marker', range: { field: 'startMs', from: 60000, to: 70000 } });
for (const marker of markers) {
  const [of] = relations.of(marker.entityId, 'marker');
  entities.update(of.endpoint0EntityId, [{ op: 'set', path: ['volume'], value: -60 }]);
}`,
    loro(doc) {
      for (const rowId of entitiesOf(doc).keys()) {
        const row = entitiesOf(doc).get(rowId) as LoroMap;
        const marker = (row.get("slots") as LoroMap | undefined)?.get("marker");
        if (!(marker instanceof LoroMap)) continue;
        const start = fieldsOf(marker).get("startMs") as number;
        if (start >= 60_000 && start < 70_000) fieldsOf(row).set("volume", -60);
      }
    },
  },
  {
    name: "move the overlay track's last clip to its front",
    script: `const overlay = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'overlay');
const last = relations.of(overlay.entityId, 'contain', { last: 1 })[0];
relations.move(last.relationId, { index: 0 });`,
    loro(doc) {
      const contain = relationsOf(doc).get("large-contain-9") as LoroMap;
      contain.set("position", "~00000");
    },
  },
  {
    name: "caption every overlay clip at its start (a tenth of all clips: creates)",
    script: `const tracks = entities.list({ entityKind: 'track' });
const overlay = tracks.find((t) => t.payload.role === 'overlay');
const captions = tracks.find((t) => t.payload.role === 'caption');
for (const [index, held] of relations.of(overlay.entityId, 'contain').entries()) {
  const [markerOf] = relations.of(held.endpoint1EntityId, 'marker');
  const at = entities.get(markerOf.endpoint1EntityId).payload.startMs;
  const caption = entities.create({ entityKind: 'caption', payload: { text: 'Overlay ' + (index + 1) } });
  const clip = entities.create({ entityKind: 'clip' });
  const marker = entities.create({ entityKind: 'sequence-marker', payload: { startMs: at, durationMs: 1500 } });
  relations.link({ relationKind: 'marker', endpoint0EntityId: clip.entityId, endpoint1EntityId: marker.entityId });
  relations.link({ relationKind: 'contain', endpoint0EntityId: clip.entityId, endpoint1EntityId: caption.entityId });
  relations.link({ relationKind: 'contain', endpoint0EntityId: captions.entityId, endpoint1EntityId: clip.entityId });
}`,
    loro(doc) {
      let index = 0;
      for (const relationId of relationsOf(doc).keys()) {
        const relation = relationsOf(doc).get(relationId) as LoroMap;
        if (relation.get("kind") !== "contain" || relation.get("endpoint0") !== "large-track-overlay")
          continue;
        const clip = entitiesOf(doc).get(relation.get("endpoint1") as string) as LoroMap;
        const at = fieldsOf((clip.get("slots") as LoroMap).get("marker") as LoroMap).get("startMs") as number;
        index += 1;
        writeClip(doc, "track-3", writeCaption(doc, `Overlay ${index}`), at, `~zzz${index}`);
      }
    },
  },
  {
    name: "delete every clip of the overlay track",
    script: `const overlay = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'overlay');
for (const held of relations.of(overlay.entityId, 'contain')) entities.delete(held.endpoint1EntityId);`,
    loro(doc) {
      for (const relationId of relationsOf(doc).keys()) {
        const relation = relationsOf(doc).get(relationId) as LoroMap;
        if (relation.get("kind") !== "contain" || relation.get("endpoint0") !== "large-track-overlay")
          continue;
        entitiesOf(doc).delete(relation.get("endpoint1") as string);
        relationsOf(doc).delete(relationId);
      }
    },
  },
];
