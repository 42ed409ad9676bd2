/** A language model whose every generation is journaled: a resumed node replays the model's answers instead of asking again. */
import type { LanguageModelV4, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { wrapLanguageModel } from "ai";
import type { NodeContext, StepInfo } from "../runner/node-context.ts";

/** What a journaled stream keeps: its parts, less `raw` chunks (provider wire data). */
interface RecordedStream {
  readonly parts: LanguageModelV4StreamPart[];
}

/**
 * Journals `doGenerate` and `doStream` through `ctx.step` (request bodies and raw response bodies left
 * out). A stream's first pass reaches the caller part by part as the model sends it, and its text goes
 * out as `text_start` / `text_delta` / `text_end` frames (AG-UI `TEXT_MESSAGE_*`); once it ends, its
 * parts are journaled. A resume or replay streams the recorded parts, text and tool calls alike,
 * without calling the model or writing the frames again.
 */
export function durableModel(ctx: NodeContext, model: LanguageModelV4): LanguageModelV4 {
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: "v4",
      wrapGenerate: async ({ doGenerate }) =>
        ctx.step(`model:${model.modelId}`, async () => {
          const { request: _request, ...result } = await doGenerate();
          const { body: _body, ...response } = result.response ?? {};
          return { ...result, response };
        }),
      wrapStream: async ({ doStream }) => {
        const { readable, writable } = new TransformStream<
          LanguageModelV4StreamPart,
          LanguageModelV4StreamPart
        >();
        const writer = writable.getWriter();
        // Writes are not awaited: the journal reads the model at its pace, the caller at its own.
        const forward = (part: LanguageModelV4StreamPart) => {
          writer.write(part).catch(() => {});
        };
        let live = false;
        const recorded = ctx.step(`model-stream:${model.modelId}`, async (info): Promise<RecordedStream> => {
          live = true;
          const { stream } = await doStream();
          const parts: LanguageModelV4StreamPart[] = [];
          const reader = stream.getReader();
          for (;;) {
            const next = await reader.read();
            if (next.done) break;
            forward(next.value);
            if (next.value.type === "raw") continue;
            parts.push(next.value);
            emitText(ctx, info, next.value);
          }
          return { parts };
        });
        recorded.then(
          ({ parts }) => {
            if (!live) for (const part of parts) forward(part);
            writer.close().catch(() => {});
          },
          (error: unknown) => {
            writer.abort(error).catch(() => {});
          },
        );
        return { stream: readable };
      },
    },
  }) as LanguageModelV4;
}

/** The stream's text as frames, under a message id stable for this step and attempt. */
function emitText(ctx: NodeContext, info: StepInfo, part: LanguageModelV4StreamPart): void {
  if (part.type !== "text-start" && part.type !== "text-delta" && part.type !== "text-end") return;
  const messageId = `${info.key}${info.attempt === 1 ? "" : `@${info.attempt}`}:text:${part.id}`;
  if (part.type === "text-start") ctx.emit("text_start", { messageId });
  else if (part.type === "text-delta") ctx.emit("text_delta", { messageId, delta: part.delta });
  else ctx.emit("text_end", { messageId });
}
