/** A language model whose every generation is journaled: a resumed node replays the model's answers instead of asking again. */
import type { LanguageModelV4 } from "@ai-sdk/provider";
import { wrapLanguageModel } from "ai";
import type { NodeContext } from "../runner/node-context.ts";

/**
 * Journals `doGenerate` through `ctx.step` (the request body and raw response body are left out).
 * Streaming calls pass through unjournaled: use `generateText` inside durable nodes.
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
    },
  }) as LanguageModelV4;
}
