/**
 * The reference schema `timeline`: tracks of clips, each Clip assembled from a Clip, a SequenceMarker
 * and content; captions, media as stored files, transcripts, phonetic scripts and `derived-from`.
 */
import { defineSchema } from "../schema/define-schema.ts";
import { field } from "../schema/field.ts";

/** Media kinds: each is one stored file (`system`, `key`); a document holds one medium per file. */
export const mediaKinds = ["video", "image", "audio", "voiceover-recording"] as const;
/** What a Clip can show or play. */
export const contentKinds = [...mediaKinds, "caption"] as const;

/**
 * Bounds of every field that would otherwise be unbounded (README: "Bounds"): a file key or storage key
 * 1024 characters, a language tag 35 (BCP 47), any time 24 h in ms, a transcript 5000 segments of at
 * most 1000 characters, a phonetic script 10 000 characters.
 */
const fileKeyLength = 1_024;
const languageLength = 35;
const maxTimeMs = 86_400_000;

const storedFile = {
  system: field.enum(["files", "speech"], {
    description: "`speech` for speech results, `files` for everything else",
  }),
  key: field.string({ minLength: 1, maxLength: fileKeyLength, fixed: true }),
};

/** Facts only the host knows, read from the store; a script that writes them is refused. */
const hostFacts = {
  storageKey: field.string({ nullable: true, maxLength: fileKeyLength, hostOnly: true }),
  digest: field.string({ nullable: true, maxLength: 200, hostOnly: true }),
};

const medium = (description: string) => ({
  description,
  identity: ["system", "key"],
  identityGroup: "media",
  fields: {
    ...storedFile,
    name: field.string({ nullable: true, maxLength: 200 }),
    durationMs: field.integer({
      nullable: true,
      min: 0,
      max: maxTimeMs,
      description: "the medium's own length; null when unknown",
    }),
    ...hostFacts,
  },
});

const textFile = field.record(
  { system: field.enum(["files"]), key: field.string({ minLength: 1, maxLength: fileKeyLength }) },
  { nullable: true },
);

export const timelineSchema = defineSchema({
  name: "timeline",
  entities: {
    track: {
      description: "A lane of clips played in order.",
      fields: {
        role: field.enum(["video", "overlay", "audio", "bgm", "voiceover", "caption"]),
        name: field.string({ nullable: true, maxLength: 200 }),
        muted: field.boolean({ default: false }),
        volume: field.number({ default: 0, min: -60, max: 12, description: "gain in dB" }),
      },
    },
    clip: {
      description: "A placed piece of content; its SequenceMarker and content live on its row.",
      fields: {
        name: field.string({ nullable: true, maxLength: 200 }),
        volume: field.number({ default: 0, min: -60, max: 12, description: "gain in dB" }),
        speed: field.number({ default: 1, min: 0.25, max: 4 }),
      },
    },
    "sequence-marker": {
      description: "Where and how long a Clip plays; stored on its Clip's row.",
      fields: {
        startMs: field.integer({ min: 0, max: maxTimeMs }),
        durationMs: field.integer({
          nullable: true,
          min: 1,
          max: maxTimeMs,
          description: "null: the content's own length",
        }),
        trimStartMs: field.integer({ default: 0, min: 0, max: maxTimeMs }),
      },
    },
    caption: {
      description: "Text on screen; it has no length of its own: its Clip's marker decides.",
      variants: true,
      fields: {
        text: field.text({ maxLength: 500 }),
        durationMs: field.null({
          description: "always null: a caption shows as long as its clip's marker says",
        }),
        style: field.record({
          position: field.enum(["top", "middle", "bottom"], { default: "bottom" }),
          fontSize: field.number({ default: 32, min: 8, max: 200 }),
        }),
        language: field.string({ nullable: true, maxLength: languageLength }),
      },
    },
    video: medium("A video file."),
    image: medium("An image file."),
    audio: medium("An audio file."),
    "voiceover-recording": medium("A recorded voice-over take."),
    "audio-script": {
      description: "A transcript read off media; it may name the text file its words and times came from.",
      fields: {
        language: field.string({ nullable: true, maxLength: languageLength }),
        segments: field.list(
          field.record({
            startMs: field.integer({ min: 0, max: maxTimeMs }),
            endMs: field.integer({ min: 0, max: maxTimeMs }),
            text: field.string({ maxLength: 1_000 }),
          }),
          { maxItems: 5_000 },
        ),
        transcription: {
          ...textFile,
          fixed: true,
          description: "the transcription text file; fixed once stated",
        },
        ...hostFacts,
      },
    },
    "phonetic-script": {
      description: "How words are pronounced; its phonemeScript is a stored text file.",
      fields: {
        language: field.string({ nullable: true, maxLength: languageLength }),
        text: field.text({ maxLength: 10_000 }),
        phonemeScript: textFile,
      },
    },
  },
  relations: {
    contain: {
      description: "A track holds its clips in order; a clip holds its content.",
      shapes: [
        { from: ["track"], to: ["clip"], cardinality: "one-to-many", ordered: true },
        {
          from: ["clip"],
          to: contentKinds,
          cardinality: "many-to-one",
          slot: { name: "content", required: true },
        },
      ],
    },
    marker: {
      description: "A clip's SequenceMarker, stored on the clip's row; deleting the clip deletes it.",
      shapes: [
        {
          from: ["clip"],
          to: ["sequence-marker"],
          cardinality: "one-to-one",
          slot: { name: "marker", embed: true, required: true },
        },
      ],
    },
    "transcript-of": {
      description: "A transcript and the medium it was read off.",
      shapes: [
        { from: ["audio-script"], to: ["video", "audio", "voiceover-recording"], cardinality: "many-to-one" },
      ],
    },
    "phonetics-of": {
      description: "A phonetic script and the caption or transcript it pronounces.",
      shapes: [{ from: ["phonetic-script"], to: ["caption", "audio-script"], cardinality: "many-to-many" }],
    },
    "derived-from": {
      description: "A product and the source it was generated from.",
      shapes: [
        {
          from: [...mediaKinds, "audio-script", "phonetic-script"],
          to: [...mediaKinds, "audio-script", "phonetic-script"],
          cardinality: "many-to-many",
        },
      ],
    },
  },
  invariants: [
    {
      name: "caption-clip-has-duration",
      kinds: ["clip"],
      description:
        "A caption has no length of its own, so the marker of a clip showing one states a durationMs.",
      // Kinds and relations besides: a marker's start, a clip's volume or a caption's text is not read.
      reads: { "sequence-marker": ["durationMs"] },
      *checkEntity(clip, view) {
        const relations = view.relationsOf(clip.entityId);
        const content = relations.find(
          (relation) => relation.relationKind === "contain" && relation.endpoint0EntityId === clip.entityId,
        );
        if (content === undefined || view.entity(content.endpoint1EntityId)?.entityKind !== "caption") return;
        const marker = relations.find((relation) => relation.relationKind === "marker");
        const markerEntity = marker === undefined ? undefined : view.entity(marker.endpoint1EntityId);
        if (markerEntity !== undefined && markerEntity.payload.durationMs === null) {
          yield {
            entityId: markerEntity.entityId,
            path: ["durationMs"],
            message: "a clip showing a caption needs a marker durationMs",
          };
        }
      },
    },
  ],
});
