/**
 * The concurrent-editors property's scripts and its plain model: a script is a list of steps drawn
 * from a seed, run through an `EditorApi` either over a real document session or over the model. Its
 * reads and the ids its links made are traced on the session, so the model replays it as it ran.
 */
import type { DocumentSession, InterpretedDocument } from "../src/index.ts";

/** Three tracks (counters: `volume`; names), two transcripts (lists: `segments`), phonetic scripts. */
export const tracks = ["track-0", "track-1", "track-2"] as const;
export const transcripts = ["script-0", "script-1"] as const;

export type Step =
  | { readonly kind: "bump"; readonly track: string }
  | { readonly kind: "append"; readonly transcript: string; readonly text: string }
  | { readonly kind: "rename"; readonly track: string; readonly name: string }
  | { readonly kind: "copy"; readonly from: string; readonly to: string }
  | { readonly kind: "add"; readonly id: string; readonly linkTo?: string }
  | { readonly kind: "remove"; readonly pick: number }
  | { readonly kind: "retext"; readonly pick: number; readonly text: string }
  | { readonly kind: "link"; readonly pick: number; readonly transcript: string }
  | { readonly kind: "unlink"; readonly pick: number }
  | { readonly kind: "throw" };

/** What a script reads and writes, over a session or the model. */
export interface EditorApi {
  volume(track: string): number;
  setVolume(track: string, value: number): void;
  segments(transcript: string): number;
  appendSegment(transcript: string, text: string): void;
  setName(track: string, name: string): void;
  /** The phonetic scripts' ids, sorted. */
  phonetics(): string[];
  createPhonetic(id: string): void;
  deletePhonetic(id: string): void;
  setText(phonetic: string, text: string): void;
  link(phonetic: string, transcript: string): void;
  /** The ids of the `phonetics-of` relations from `phonetic`, sorted. */
  linksOf(phonetic: string): string[];
  unlink(relationId: string): void;
}

/** A counter's next value: up by one, past the field's maximum back to its minimum. */
export const bumped = (value: number) => (value >= 12 ? -60 : value + 1);

/** Runs one script's steps; a `throw` step throws half way. */
export function runScript(api: EditorApi, steps: readonly Step[]): void {
  for (const step of steps) {
    switch (step.kind) {
      case "bump":
        api.setVolume(step.track, bumped(api.volume(step.track)));
        break;
      case "append":
        api.appendSegment(step.transcript, step.text);
        break;
      case "rename":
        api.setName(step.track, step.name);
        break;
      case "copy":
        api.setVolume(step.to, api.volume(step.from));
        break;
      case "add":
        api.createPhonetic(step.id);
        if (step.linkTo !== undefined) api.link(step.id, step.linkTo);
        break;
      case "remove": {
        const ids = api.phonetics();
        if (ids.length > 2) api.deletePhonetic(ids[step.pick % ids.length] as string);
        break;
      }
      case "retext": {
        const ids = api.phonetics();
        if (ids.length > 0) api.setText(ids[step.pick % ids.length] as string, step.text);
        break;
      }
      case "link": {
        const ids = api.phonetics();
        if (ids.length > 0) api.link(ids[step.pick % ids.length] as string, step.transcript);
        break;
      }
      case "unlink": {
        const ids = api.phonetics();
        const links = ids.length === 0 ? [] : api.linksOf(ids[step.pick % ids.length] as string);
        if (links.length > 0) api.unlink(links[0] as string);
        break;
      }
      case "throw":
        throw new Error("the script throws half way");
    }
  }
}

/** A script drawn from `next`: one to three steps, sometimes a throw after the first. */
export function randomScript(next: (below: number) => number, unique: () => string): Step[] {
  const pick = <Item>(items: readonly Item[]) => items[next(items.length)] as Item;
  const steps: Step[] = [];
  const count = 1 + next(3);
  for (let index = 0; index < count; index++) {
    const roll = next(18);
    if (roll < 3) steps.push({ kind: "bump", track: pick(tracks) });
    else if (roll < 5)
      steps.push({ kind: "append", transcript: pick(transcripts), text: `line ${unique()}` });
    else if (roll < 7) steps.push({ kind: "rename", track: pick(tracks), name: `name ${unique()}` });
    else if (roll < 9) steps.push({ kind: "copy", from: pick(tracks), to: pick(tracks) });
    else if (roll < 11) {
      const id = `phonetic-${unique()}`;
      steps.push(next(2) === 0 ? { kind: "add", id } : { kind: "add", id, linkTo: pick(transcripts) });
    } else if (roll < 13) steps.push({ kind: "remove", pick: next(8) });
    else if (roll < 15) steps.push({ kind: "retext", pick: next(8), text: `text ${unique()}` });
    else if (roll < 17) steps.push({ kind: "link", pick: next(8), transcript: pick(transcripts) });
    else steps.push({ kind: "unlink", pick: next(8) });
  }
  if (next(8) === 0) steps.splice(1 + next(steps.length), 0, { kind: "throw" });
  return steps;
}

/** One read a script made, or the id a link of it made. */
export type Traced =
  | { readonly read: string; readonly value: unknown }
  | { readonly linked: string; readonly relationId: string }
  /** A field set: `changed` false when it held the value already (Loro writes no op for it). */
  | { readonly wrote: string; readonly changed: boolean };

/**
 * The fields a script wrote (a list appended to, a field set to a value it did not hold), named as its
 * reads of them are: a read of one of them is guarded by the lost-update rule (a concurrent commit that
 * wrote the field too makes the script's push `conflicted`). A set to the value the field held writes
 * no op, so it guards nothing.
 */
export function writtenFields(steps: readonly Step[], trace: readonly Traced[]): Set<string> {
  const written = new Set<string>();
  for (const step of steps) if (step.kind === "append") written.add(`segments ${step.transcript}`);
  for (const entry of trace) if ("wrote" in entry && entry.changed) written.add(entry.wrote);
  return written;
}

/** An `EditorApi` over a document session, tracing what it read and the ids it linked. */
export function sessionApi(session: DocumentSession, trace: Traced[]): EditorApi {
  const read = <Value>(key: string, value: Value) => {
    trace.push({ read: key, value });
    return value;
  };
  const phonetics = () =>
    session.entities
      .list({ entityKind: "phonetic-script" })
      .map((entity) => entity.entityId)
      .sort();
  const segmentsOf = (transcript: string) =>
    (session.entities.get(transcript)?.payload.segments as unknown[] | undefined) ?? [];
  return {
    volume: (track) => read(`volume ${track}`, session.entities.get(track)?.payload.volume as number),
    setVolume(track, value) {
      const changed = session.entities.get(track)?.payload.volume !== value;
      trace.push({ wrote: `volume ${track}`, changed });
      session.entities.update(track, [{ op: "set", path: ["volume"], value }]);
    },
    segments: (transcript) => read(`segments ${transcript}`, segmentsOf(transcript).length),
    appendSegment(transcript, text) {
      const at = this.segments(transcript);
      session.entities.update(transcript, [
        { op: "insert", path: ["segments", at], value: { startMs: at, endMs: at + 1, text } },
      ]);
    },
    setName(track, name) {
      const changed = session.entities.get(track)?.payload.name !== name;
      trace.push({ wrote: `name ${track}`, changed });
      session.entities.update(track, [{ op: "set", path: ["name"], value: name }]);
    },
    phonetics: () => read("phonetics", phonetics()),
    createPhonetic(id) {
      session.entities.create({ entityKind: "phonetic-script", entityId: id, payload: { text: id } });
    },
    deletePhonetic(id) {
      session.entities.delete(id);
    },
    setText(phonetic, text) {
      trace.push({ wrote: `text ${phonetic}`, changed: true });
      session.entities.update(phonetic, [{ op: "set", path: ["text"], value: text }]);
    },
    link(phonetic, transcript) {
      const relation = session.relations.link({
        relationKind: "phonetics-of",
        endpoint0EntityId: phonetic,
        endpoint1EntityId: transcript,
      });
      trace.push({ linked: `${phonetic} → ${transcript}`, relationId: relation.relationId });
    },
    linksOf: (phonetic) =>
      read(
        `links ${phonetic}`,
        session.relations
          .of(phonetic, "phonetics-of")
          .filter((relation) => relation.endpoint0EntityId === phonetic)
          .map((relation) => relation.relationId)
          .sort(),
      ),
    unlink(relationId) {
      session.relations.unlink(relationId);
    },
  };
}

/** The plain model: what the property compares a document with. */
export interface Model {
  readonly volumes: Record<string, number>;
  readonly names: Record<string, string | null>;
  readonly segments: Record<string, string[]>;
  /** Phonetic scripts' texts by id. */
  readonly phonetics: Record<string, string>;
  /** `phonetics-of` relations by id: `phonetic → transcript`. */
  readonly links: Record<string, string>;
}

/** A document read into the model's shape (and its issues). */
export function modelOf(document: InterpretedDocument): Model & { issues: unknown[] } {
  const model: Model = { volumes: {}, names: {}, segments: {}, phonetics: {}, links: {} };
  for (const entity of document.entities) {
    if (entity.entityKind === "track") {
      model.volumes[entity.entityId] = entity.payload.volume as number;
      model.names[entity.entityId] = entity.payload.name as string | null;
    } else if (entity.entityKind === "audio-script")
      model.segments[entity.entityId] = (entity.payload.segments as { text: string }[]).map((s) => s.text);
    else if (entity.entityKind === "phonetic-script")
      model.phonetics[entity.entityId] = String(entity.payload.text);
  }
  for (const relation of document.relations)
    if (relation.relationKind === "phonetics-of")
      model.links[relation.relationId] = `${relation.endpoint0EntityId} → ${relation.endpoint1EntityId}`;
  return { ...sortedModel(model), issues: [...document.issues] };
}

/** The model with its records' keys sorted, so two equal models compare equal. */
export function sortedModel(model: Model): Model {
  const sortKeys = <Value>(record: Record<string, Value>) =>
    Object.fromEntries(Object.entries(record).sort(([left], [right]) => (left < right ? -1 : 1)));
  return {
    volumes: sortKeys(model.volumes),
    names: sortKeys(model.names),
    segments: sortKeys(model.segments),
    phonetics: sortKeys(model.phonetics),
    links: sortKeys(model.links),
  };
}

/**
 * Replays a committed script on `model` (changed in place) as the script ran: a read of what the
 * script also writes (a counter it bumps, a list it appends to) must find in the model what the script
 * read (else it was applied on stale reads: returned in `stale`); every other read returns what the
 * script read (the lost-update rule compares writes, not reads: ADR 0475); a link takes the id the
 * script's link made, and one to an entity not in the model is a write the rule should have refused.
 */
export function replay(
  model: Model,
  steps: readonly Step[],
  trace: readonly Traced[],
): { faults: string[]; skewed: boolean } {
  const faults: string[] = [];
  let skewed = false;
  let at = 0;
  const guarded = writtenFields(steps, trace);
  // Writes into an entity a commit before deleted: a fault unless the script deletes it too (then
  // nothing of either is left, and the rule lets both stand: ADR 0475).
  const intoDeleted = new Map<string, string>();
  const traced = <Value>(key: string, now: Value): Value => {
    const entry = trace[at++];
    if (entry === undefined || !("read" in entry) || entry.read !== key)
      throw new Error(`the replay read ${key} where the script read ${JSON.stringify(entry)}`);
    if (JSON.stringify(now) === JSON.stringify(entry.value)) return entry.value as Value;
    if (!guarded.has(key)) skewed = true;
    else
      faults.push(
        `read ${key} as ${JSON.stringify(entry.value)} where the commit order had ${JSON.stringify(now)}`,
      );
    return entry.value as Value;
  };
  /** Whether the script's set of `key` changed it (a set of the value held writes nothing). */
  const wrote = (key: string) => {
    const entry = trace[at++];
    if (entry === undefined || !("wrote" in entry) || entry.wrote !== key)
      throw new Error(`the replay wrote ${key} where the script did ${JSON.stringify(entry)}`);
    return entry.changed;
  };
  const api: EditorApi = {
    volume: (track) => traced(`volume ${track}`, model.volumes[track] as number),
    setVolume(track, value) {
      if (wrote(`volume ${track}`)) model.volumes[track] = value;
    },
    segments: (transcript) => traced(`segments ${transcript}`, model.segments[transcript]?.length ?? 0),
    appendSegment(transcript, text) {
      const at_ = this.segments(transcript);
      const list = model.segments[transcript] as string[];
      list.splice(Math.min(at_, list.length), 0, text);
    },
    setName(track, name) {
      if (wrote(`name ${track}`)) model.names[track] = name;
    },
    phonetics: () => traced("phonetics", Object.keys(model.phonetics).sort()),
    createPhonetic(id) {
      if (id in model.phonetics) faults.push(`${id} created twice`);
      else model.phonetics[id] = id;
    },
    deletePhonetic(id) {
      // Deleted by another commit too: both deletes stand (ADR 0475).
      delete model.phonetics[id];
      intoDeleted.delete(id);
      for (const [relationId, ends] of Object.entries(model.links))
        if (ends.startsWith(`${id} → `)) delete model.links[relationId];
    },
    link(phonetic, transcript) {
      const entry = trace[at++];
      const ends = `${phonetic} → ${transcript}`;
      if (entry === undefined || !("linked" in entry) || entry.linked !== ends)
        throw new Error(`the replay linked ${ends} where the script did ${JSON.stringify(entry)}`);
      if (!(phonetic in model.phonetics))
        intoDeleted.set(phonetic, `linked ${ends} where the commit order had deleted ${phonetic}`);
      else model.links[entry.relationId] = ends;
    },
    setText(phonetic, text) {
      wrote(`text ${phonetic}`);
      if (!(phonetic in model.phonetics))
        intoDeleted.set(phonetic, `wrote the text of ${phonetic}, deleted before it`);
      else model.phonetics[phonetic] = text;
    },
    linksOf: (phonetic) =>
      traced(
        `links ${phonetic}`,
        Object.entries(model.links)
          .filter(([, ends]) => ends.startsWith(`${phonetic} → `))
          .map(([relationId]) => relationId)
          .sort(),
      ),
    unlink(relationId) {
      delete model.links[relationId];
    },
  };
  runScript(api, steps);
  if (at !== trace.length) throw new Error(`the replay used ${at} of ${trace.length} traced reads`);
  faults.push(...intoDeleted.values());
  return { faults, skewed };
}
