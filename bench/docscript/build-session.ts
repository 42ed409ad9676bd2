/**
 * Building a document through the session against writing it straight to Loro (issue 25, point 5): the
 * sample timeline with N extra image clips (image, clip, its marker, on the video track: three entities
 * a clip) made by `sampleTimelineSnapshot({ extraClips })` — every create and link a checked session
 * write — beside the same rows written through Loro's API (maps set by key, one commit). CPU and wall
 * time of each, in this process.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/build-session.ts [extraClips]   # 3330 (10k entities)
 */
import { loadavg } from "node:os";
import { LoroDoc, LoroMap } from "loro-crdt";
import { sampleTimelineSnapshot } from "../../packages/docscript/src/module/sample-timeline.ts";

const extraClips = Number(process.argv[2] ?? 3330);

function timed<T>(work: () => T): { value: T; wallMs: number; cpuMs: number } {
  const cpu = process.cpuUsage();
  const started = performance.now();
  const value = work();
  const used = process.cpuUsage(cpu);
  return { value, wallMs: performance.now() - started, cpuMs: (used.user + used.system) / 1000 };
}

/** The same clips straight to Loro: an image row, a clip row (marker and content in its slots), a contain. */
function straightToLoro(): Uint8Array {
  const doc = new LoroDoc();
  doc.setPeerId(1);
  const entities = doc.getMap("entities");
  const relations = doc.getMap("relations");
  for (let index = 0; index < extraClips; index++) {
    const image = entities.setContainer(`image-${index}`, new LoroMap());
    image.set("kind", "image");
    const imageFields = image.setContainer("fields", new LoroMap());
    for (const [name, value] of Object.entries({
      system: "files",
      key: `shot-${index}.png`,
      name: `Shot ${index}`,
      durationMs: null,
      storageKey: `store/shot-${index}.png`,
      digest: `sha256:${index}`,
    }))
      imageFields.set(name, value);
    const clip = entities.setContainer(`clip-${index}`, new LoroMap());
    clip.set("kind", "clip");
    const fields = clip.setContainer("fields", new LoroMap());
    fields.set("name", null);
    fields.set("volume", 0);
    fields.set("speed", 1);
    const slots = clip.setContainer("slots", new LoroMap());
    slots.set("content", `image-${index}`);
    const marker = slots.setContainer("marker", new LoroMap());
    marker.set("id", `marker-${index}`);
    marker.set("kind", "sequence-marker");
    const markerFields = marker.setContainer("fields", new LoroMap());
    markerFields.set("startMs", 8000 + index * 1000);
    markerFields.set("durationMs", 1000);
    markerFields.set("trimStartMs", 0);
    const contain = relations.setContainer(`contain-${index}`, new LoroMap());
    contain.set("kind", "contain");
    contain.set("endpoint0", "track-1");
    contain.set("endpoint1", `clip-${index}`);
    contain.set("position", `a${index}`);
  }
  doc.commit();
  return doc.export({ mode: "snapshot" });
}

const loro = timed(straightToLoro);
const session = timed(() => sampleTimelineSnapshot({ extraClips }));
console.log(
  `${extraClips} extra clips (${12 + extraClips * 3} entities): session ${Math.round(session.wallMs)} ms wall / ${Math.round(session.cpuMs)} ms CPU; straight to Loro ${Math.round(loro.wallMs)} ms wall / ${Math.round(loro.cpuMs)} ms CPU; session / Loro (CPU) ${(session.cpuMs / loro.cpuMs).toFixed(1)}x (load average ${loadavg()[0]?.toFixed(1)})`,
);
