/**
 * A thread's history on the runs page: its states step by step (each run's start, then the state after
 * each node), read from the durable HTTP app's `GET /runs/:threadId/history` a page at a time when the
 * section is opened, and again when the run pauses or ends.
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
  const row = (checkpoint: Json) => {
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
  };
  const page = (afterSeq?: number) =>
    api(
      `/api/durable/runs/${encodeURIComponent(threadId)}/history${afterSeq === undefined ? "" : `?afterSeq=${afterSeq}`}`,
    );
  // The history comes a page at a time (durable answers at most 100 checkpoints or 8 MiB a page): the
  // first page when the section opens, each later one when asked for.
  const load = async () => {
    try {
      const first = await page();
      const rows = h("tbody", {}, first.checkpoints.map(row));
      const more = h("button", { type: "button", class: "history-more" }, "Show later steps");
      const showMore = (next: number | undefined) => {
        more.hidden = next === undefined;
        more.onclick = async () => {
          more.disabled = true;
          try {
            const later = await page(next);
            rows.append(...later.checkpoints.map(row));
            showMore(later.nextAfterSeq);
          } catch (error) {
            more.after(h("p", { class: "error" }, `The history could not be read: ${messageOf(error)}`));
          } finally {
            more.disabled = false;
          }
        };
      };
      showMore(first.nextAfterSeq);
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
          rows,
        ),
        more,
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
