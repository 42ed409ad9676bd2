/**
 * The video assistant: a durable agent that captions a video on a timeline. Its "model" is scripted
 * (no hosted LLM here): each turn is the tool call a model would ask for, in order. Its tools all live
 * on the mesh, on other machines:
 *
 * 1. `memory.memory_search` — the user's caption style, if they told it before; a style stated in this
 *    request is remembered with `memory.memory_add` (a `preference`; the memory service keeps it once).
 * 2. `transcribe.transcribe` — the media's speech as timed segments, from a Python stdio bundle.
 * 3. `docscript.edit` (`run-edit-script`) — a script adding a caption clip per segment, in the user's
 *    style, run as a preview: nothing lands.
 * 4. A person approves the captions (they may edit their text), through durable's approval: the run
 *    pauses until it is answered over durable's HTTP API.
 * 5. `docscript.edit` with `auto_commit` — the approved captions land on the timeline as one update.
 *
 * Every call is one durable step carrying the step's idempotency key to the mesh, so the module's
 * results ledger (ADR 0210) answers a repeat instead of running the tool again: a driver killed after
 * the transcription ran gets the recorded segments back. The edit script also skips a caption the
 * timeline already holds, so even a commit repeated in the serving node's own crash window adds none.
 */
import { approve, createGraph, type Graph, type NodeContext, tool } from "@tackle/durable";
import type { MeshClient } from "@tackle/mesh";

export const graphName = "video-assistant";
/** The timeline the docscript module serves. */
export const timelineId = "sample-timeline";

export interface AssistantInput {
  readonly userId: string;
  /** The media file's key, e.g. `interview.wav`. */
  readonly media: string;
  /** What the user asked, in words: "Caption interview.wav, in uppercase please". */
  readonly request: string;
}

export interface AssistantState extends AssistantInput {
  readonly style?: CaptionStyle;
  readonly captions?: readonly Caption[];
  readonly outcome?: "captioned" | "declined";
  readonly reason?: string;
  readonly planId?: string;
  readonly [key: string]: unknown;
}

export type CaptionStyle = "uppercase" | "lowercase" | "as spoken";

export interface Caption {
  readonly startMs: number;
  readonly durationMs: number;
  readonly text: string;
}

export interface ApprovalAnswer {
  readonly approved: boolean;
  readonly reason?: string;
  readonly editedArgs?: { readonly captions?: readonly Caption[] };
}

/** The scripted model reads a style out of the request the way a model would: by its words. */
export function styleIn(text: string): CaptionStyle | undefined {
  const lower = text.toLowerCase();
  if (/upper ?case|capitals|all caps/.test(lower)) return "uppercase";
  if (/lower ?case/.test(lower)) return "lowercase";
  if (/as spoken|unchanged/.test(lower)) return "as spoken";
  return undefined;
}

export function styled(text: string, style: CaptionStyle): string {
  return style === "uppercase" ? text.toUpperCase() : style === "lowercase" ? text.toLowerCase() : text;
}

/**
 * The edit script for a set of captions: one clip per caption on the caption track, skipping a caption
 * whose text already plays at its time (so running it twice adds nothing).
 */
export function captionScript(captions: readonly Caption[]): string {
  return `const wanted = ${JSON.stringify(captions)};
const track = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'caption');
const held = new Set();
for (const caption of entities.list({ entityKind: 'caption' })) {
  const clip = relations.of(caption.entityId, 'contain').find((r) => r.endpoint1EntityId === caption.entityId);
  if (clip === undefined) continue;
  const mark = relations.of(clip.endpoint0EntityId, 'marker')[0];
  const marker = mark === undefined ? undefined : entities.get(mark.endpoint1EntityId);
  held.add(caption.payload.text + '@' + (marker === undefined ? '' : marker.payload.startMs));
}
let added = 0;
for (const want of wanted) {
  if (held.has(want.text + '@' + want.startMs)) continue;
  const caption = entities.create({ entityKind: 'caption', payload: { text: want.text } });
  const clip = entities.create({ entityKind: 'clip' });
  const marker = entities.create({ entityKind: 'sequence-marker', payload: { startMs: want.startMs, durationMs: want.durationMs } });
  relations.link({ relationKind: 'marker', endpoint0EntityId: clip.entityId, endpoint1EntityId: marker.entityId });
  relations.link({ relationKind: 'contain', endpoint0EntityId: clip.entityId, endpoint1EntityId: caption.entityId });
  relations.link({ relationKind: 'contain', endpoint0EntityId: track.entityId, endpoint1EntityId: clip.entityId });
  added += 1;
}
console.log('captions added', added);`;
}

/** What an approver may send as `editedArgs`: the captions, their text changed or some left out. */
const editableSchema = {
  type: "object",
  properties: {
    captions: {
      type: "array",
      maxItems: 20,
      items: {
        type: "object",
        properties: {
          startMs: { type: "integer", minimum: 0 },
          durationMs: { type: "integer", minimum: 1 },
          text: { type: "string", minLength: 1, maxLength: 500 },
        },
        required: ["startMs", "durationMs", "text"],
        additionalProperties: false,
      },
    },
  },
  required: ["captions"],
  additionalProperties: false,
};

/** Failures of a keyed call that the module's results ledger answers when it is asked again. */
const mayHaveRun = new Set(["node_lost", "reply_lost"]);

export interface AssistantOptions {
  readonly mesh: MeshClient;
  /** Per mesh call; a retryable failure (the node died, the broker restarts) is asked again until then. */
  readonly callDeadlineMs?: number;
  /** Transcription time per call, in seconds (the Python tool sleeps it). */
  readonly transcribeSeconds?: number;
  /** Told each mesh call's outcome, for a driver that reports progress. */
  readonly onCall?: (event: { tool: string; attempt: number; ok: boolean; code?: string }) => void;
}

export function createAssistantGraph(options: AssistantOptions): Graph<AssistantState> {
  const { mesh } = options;
  const deadlineMs = options.callDeadlineMs ?? 120_000;

  /**
   * One tool on the mesh as one durable step. The mesh call carries the step's idempotency key; a
   * retryable failure, or one after which the tool may have run, is asked again under the same key,
   * which the module's results ledger answers (or runs, when the first never ran). Any other failure
   * fails the step.
   */
  const call = <Output>(ctx: NodeContext, name: string, args: Record<string, unknown>) =>
    tool(ctx, name, args, async (info) => {
      const deadline = Date.now() + deadlineMs;
      for (;;) {
        const result = await mesh.call(name, args, {
          idempotencyKey: info.idempotencyKey,
          timeoutMs: 20_000,
        });
        options.onCall?.({
          tool: name,
          attempt: info.attempt,
          ok: result.ok,
          ...(result.ok ? {} : { code: result.error.code }),
        });
        if (result.ok) return result.output as Output;
        // A call that may have run (its node died) or did run (its reply was lost) is asked again under
        // its key: the ledger answers it with the recorded result instead of running it again.
        const retryable = result.error.retryable === true || mayHaveRun.has(result.error.code);
        if (!retryable || Date.now() > deadline) throw result.error;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    });

  return createGraph<AssistantState>(graphName).node("assistant", async (state, ctx) => {
    // Turn 1: what does this user like? A style said now is remembered for next time.
    const found = await call<{ results: { text: string }[] }>(ctx, "memory.memory_search", {
      userId: state.userId,
      query: "caption style",
      kinds: ["preference"],
      limit: 5,
    });
    const stated = styleIn(state.request);
    if (stated !== undefined) {
      await call(ctx, "memory.memory_add", {
        userId: state.userId,
        kind: "preference",
        content: `Caption style: ${stated}`,
      });
    }
    const remembered = found.results.map((hit) => styleIn(hit.text)).find((style) => style !== undefined);
    const style: CaptionStyle = stated ?? remembered ?? "as spoken";

    // Turn 2: the words, from the transcription node.
    const transcript = await call<{ segments: Caption[] }>(ctx, "transcribe.transcribe", {
      media: state.media,
      seconds: options.transcribeSeconds ?? 0.3,
    });
    const proposed = transcript.segments.map((segment) => ({
      ...segment,
      text: styled(segment.text, style),
    }));

    // Turn 3: a preview of the edit; nothing lands yet.
    const preview = await call<{ plan_id: string; status?: string }>(ctx, "docscript.edit", {
      op: "run-edit-script",
      doc_id: timelineId,
      script: captionScript(proposed),
    });

    // Turn 4: a person approves the captions (or edits them, or says no).
    const answer = await approve<ApprovalAnswer>(ctx, {
      title: `Add ${proposed.length} captions to the timeline?`,
      description: `Captions for ${state.media} in the style "${style}" (preview plan ${preview.plan_id})`,
      toolName: "docscript.edit",
      params: { captions: proposed },
      inputSchema: editableSchema,
    });
    if (!answer.approved) {
      return {
        style,
        outcome: "declined",
        ...(answer.reason === undefined ? {} : { reason: answer.reason }),
      };
    }
    const captions = answer.editedArgs?.captions ?? proposed;

    // Turn 5: the approved captions land, once.
    const committed = await call<{ plan_id: string; commit?: { status: string } }>(ctx, "docscript.edit", {
      op: "run-edit-script",
      doc_id: timelineId,
      script: captionScript(captions),
      auto_commit: true,
    });
    if (committed.commit?.status !== "committed")
      throw new Error(`the captions did not land: ${JSON.stringify(committed.commit)}`);
    return { style, captions, outcome: "captioned", planId: committed.plan_id };
  });
}
