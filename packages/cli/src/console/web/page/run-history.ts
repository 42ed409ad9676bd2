/**
 * A thread's history on the runs page: its states step by step (each run's start, then the state after
 * each node), read from the durable HTTP app's `GET /runs/:threadId/history` when the section is opened,
 * and again when the run pauses or ends.
 */
import { api, type Json } from "./api.ts";
import { h, messageOf, showData } from "./dom.ts";

export interface RunHistory {
  readonly element: HTMLElement;
  /** Reads the history again if the section is open. */
  refresh(): Promise<void>;
}

export function runHistory(threadId: string): RunHistory {
  const body = h("div", { class: "history-body" });
  const element = h(
    "details",
    { class: "run-history", id: "run-history" },
    h("summary", {}, "History: the thread's state step by step"),
    body,
  );
  const load = async () => {
    try {
      const { checkpoints } = await api(`/api/durable/runs/${encodeURIComponent(threadId)}/history`);
      body.replaceChildren(
        h(
          "table",
          {},
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              ["Seq", "Run", "After", "Next", "State"].map((text) => h("th", {}, text)),
            ),
          ),
          h(
            "tbody",
            {},
            checkpoints.map((checkpoint: Json) => {
              const state = h("pre", { class: "data" });
              showData(state, checkpoint.state);
              return h(
                "tr",
                { "data-seq": checkpoint.seq },
                h("td", {}, String(checkpoint.seq)),
                h("td", {}, h("code", {}, checkpoint.runId)),
                h("td", {}, checkpoint.node ?? "(start)"),
                h("td", {}, checkpoint.next ?? "(end)"),
                h("td", {}, state),
              );
            }),
          ),
        ),
      );
    } catch (error) {
      body.replaceChildren(h("p", { class: "error" }, `The history could not be read: ${messageOf(error)}`));
    }
  };
  element.addEventListener("toggle", () => {
    if (element.open) void load();
  });
  return {
    element,
    async refresh() {
      if (element.open) await load();
    },
  };
}
