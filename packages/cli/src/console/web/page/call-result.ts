/** A tool call from its panel, and its answer as a person reads it: outcome, round trip, data. */
import { type CallAnswer, callTool, type Issue } from "./api.ts";
import { h, json, messageOf } from "./dom.ts";
import type { ToolInfo } from "./modules-page.ts";

export type ShownAnswer = CallAnswer & { readonly roundTrip: number };

/**
 * Calls `tool` with `args`, showing its progress and then its answer in `root`; issues of a refused
 * input go to `place` (beside the form's fields), those it cannot place are listed. Undefined when the
 * call never got an answer (the reason is shown).
 */
export async function callAndShow(
  qualified: string,
  args: unknown,
  root: HTMLElement,
  _tool: ToolInfo,
  place: (issues: readonly Issue[]) => Issue[],
): Promise<ShownAnswer | undefined> {
  root.replaceChildren(h("p", { class: "muted" }, "Calling…"));
  try {
    // What the person waited for is the round trip; the tool's own time is said beside it.
    const sent = performance.now();
    const answer = await callTool(qualified, args);
    const roundTrip = Math.round((performance.now() - sent) * 10) / 10;
    const timing = `${roundTrip} ms round trip (the tool took ${answer.ms} ms)`;
    if (answer.ok) {
      root.replaceChildren(
        h("p", { class: "ok" }, `Result in ${timing}`),
        h("pre", { class: "data", "data-result": "ok" }, json(answer.output)),
      );
    } else {
      const unplaced = answer.error.code === "invalid_input" ? place(answer.error.data?.issues ?? []) : [];
      root.replaceChildren(
        h("p", { class: "error" }, `Error ${answer.error.code} in ${timing}`),
        ...unplaced.map((issue) =>
          h("p", { class: "error" }, `${issue.path.join(".") || "(input)"}: ${issue.message}`),
        ),
        h("pre", { class: "data", "data-result": "error" }, json(answer.error)),
      );
    }
    return { ...answer, roundTrip };
  } catch (error) {
    root.replaceChildren(h("p", { class: "error" }, messageOf(error)));
    return undefined;
  }
}
