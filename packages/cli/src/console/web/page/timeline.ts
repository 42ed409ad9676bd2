/** A timeline document as SVG: tracks as lanes, clips as blocks, captions under them, markers as ticks. */
import type { Json } from "./api.ts";
import { h } from "./dom.ts";

interface Entity {
  readonly entityId: string;
  readonly entityKind: string;
  readonly payload?: Json;
}

interface Relation {
  readonly relationKind: string;
  readonly endpoint0EntityId: string;
  readonly endpoint1EntityId: string;
}

/** Tracks as lanes, clips as blocks on a time axis, captions under their blocks, markers as ticks. */
export function drawTimeline(snapshot: Snapshot): SVGSVGElement {
  const lanes = lanesOf(snapshot);
  const end = Math.max(
    10_000,
    ...lanes.flatMap((lane) => lane.clips.map((clip) => clip.start + (clip.duration ?? 0))),
  );
  const width = 900;
  const labelWidth = 150;
  const captionLine = 14;
  const scale = (width - labelWidth - 20) / end;
  // The drawing is built before it is on screen, so text widths are estimated: 11px text, ≤ 7 units a character.
  const textWidth = (text: string) => text.length * 7;
  // Each lane's clips in time order; a label only inside a block it fits in (the block's title names it
  // always); a caption under its block, on the first line where it overlaps no earlier caption.
  let top = 24;
  const laid = lanes.map((lane) => {
    const lineEnds: number[] = [];
    const clips = [...lane.clips]
      .sort((a, b) => a.start - b.start)
      .map((clip) => {
        const x = labelWidth + clip.start * scale;
        const blockWidth = Math.max(4, (clip.duration ?? end - clip.start) * scale);
        const kind = clip.content?.entityKind ?? "clip";
        const label =
          kind === "caption"
            ? "caption"
            : (clip.content?.payload?.name ?? clip.content?.payload?.key ?? kind);
        let caption: string | undefined;
        let line = 0;
        if (kind === "caption") {
          caption = `“${clip.content?.payload?.text ?? ""}”`;
          line = lineEnds.findIndex((right) => right <= x);
          if (line < 0) line = lineEnds.push(0) - 1;
          lineEnds[line] = x + 2 + textWidth(caption) + 6;
        }
        return { ...clip, x, blockWidth, kind, label, caption, line };
      });
    const laneHeight = 56 + Math.max(0, lineEnds.length - 1) * captionLine;
    const y = top;
    top += laneHeight;
    return { lane, clips, y, laneHeight };
  });
  const height = top + 16;
  const svg = h("svg", {
    viewBox: `0 0 ${width} ${height}`,
    width: "100%",
    role: "img",
    "aria-label": `Timeline with ${lanes.length} tracks and ${lanes.reduce((sum, lane) => sum + lane.clips.length, 0)} clips`,
    "data-clips": lanes.reduce((sum, lane) => sum + lane.clips.length, 0),
  }) as SVGSVGElement;
  const step = end > 30_000 ? 10_000 : 1000;
  for (let at = 0; at <= end; at += step) {
    const x = labelWidth + at * scale;
    svg.append(
      h("line", { x1: x, x2: x, y1: 20, y2: height, class: "tick" }),
      h("text", { x, y: 14, class: "axis", "text-anchor": "middle" }, `${at / 1000}s`),
    );
  }
  for (const { lane, clips, y, laneHeight } of laid) {
    svg.append(
      h(
        "text",
        { x: 8, y: y + 22, class: "lane-label" },
        `${lane.track.payload?.name ?? lane.track.entityId} (${lane.track.payload?.role ?? "track"})`,
      ),
    );
    svg.append(
      h("line", {
        x1: labelWidth,
        x2: width - 10,
        y1: y + laneHeight - 4,
        y2: y + laneHeight - 4,
        class: "lane-line",
      }),
    );
    for (const clip of clips) {
      const { x, blockWidth, kind, label } = clip;
      const group = h(
        "g",
        { class: `clip clip-${kind}`, "data-clip": clip.clip.entityId },
        h(
          "title",
          {},
          `${label}: ${clip.start / 1000}s, ${clip.duration === null ? "to the end" : `${clip.duration / 1000}s`}`,
        ),
        h("rect", { x, y, width: blockWidth, height: 26, rx: 4 }),
        textWidth(label) + 8 <= blockWidth
          ? h("text", { x: x + 4, y: y + 17, class: "clip-label" }, label)
          : undefined,
        h("line", { x1: x, x2: x, y1: y - 2, y2: y + 30, class: "marker" }),
      );
      if (clip.caption !== undefined)
        group.append(
          h("text", { x: x + 2, y: y + 42 + clip.line * captionLine, class: "caption" }, clip.caption),
        );
      svg.append(group);
    }
  }
  return svg;
}

interface Snapshot {
  readonly entities: readonly Entity[];
  readonly relations: readonly Relation[];
}

/** The document's tracks in lane order, each with its clips: marker (time), content, start and duration. */
function lanesOf(snapshot: Snapshot) {
  const byId = new Map(snapshot.entities.map((entity) => [entity.entityId, entity]));
  const contains = (parentId: string): Entity[] =>
    snapshot.relations
      .filter((relation) => relation.relationKind === "contain" && relation.endpoint0EntityId === parentId)
      .map((relation) => byId.get(relation.endpoint1EntityId))
      .filter((entity): entity is Entity => entity !== undefined);
  const markerOf = (clipId: string) => {
    const relation = snapshot.relations.find(
      (item) => item.relationKind === "marker" && item.endpoint0EntityId === clipId,
    );
    return relation === undefined ? undefined : byId.get(relation.endpoint1EntityId);
  };
  // Lanes in a stable order (a document keeps no order among its tracks, and its snapshot lists them by
  // id): the timeline schema's roles in order, pictures above sound above captions; then by name.
  const roles = ["video", "overlay", "audio", "bgm", "voiceover", "caption"];
  const rank = (track: Entity) => {
    const at = roles.indexOf(track.payload?.role);
    return at < 0 ? roles.length : at;
  };
  const tracks = snapshot.entities
    .filter((entity) => entity.entityKind === "track")
    .sort(
      (a, b) =>
        rank(a) - rank(b) ||
        String(a.payload?.name ?? "").localeCompare(String(b.payload?.name ?? "")) ||
        a.entityId.localeCompare(b.entityId),
    );
  const lanes = tracks.map((track) => ({
    track,
    clips: contains(track.entityId)
      .filter((entity) => entity.entityKind === "clip")
      .map((clip) => {
        const marker = markerOf(clip.entityId);
        const content = contains(clip.entityId)[0];
        const start = Number(marker?.payload?.startMs ?? 0);
        const mediaLength = Number(content?.payload?.durationMs ?? 0);
        const duration = marker?.payload?.durationMs ?? (mediaLength > 0 ? mediaLength : null);
        return { clip, marker, content, start, duration };
      }),
  }));
  return lanes;
}
