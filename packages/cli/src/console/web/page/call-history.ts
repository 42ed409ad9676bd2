/** The calls made from this browser tab (session storage), newest first, each one re-runnable. */
import { h, statusBadge } from "./dom.ts";

export interface HistoryEntry {
  readonly tool: string;
  readonly args: unknown;
  readonly ok: boolean;
  /** The round trip, in milliseconds. */
  readonly ms: number;
  readonly at: string;
}

const key = "tackle.calls";
const kept = 50;
/** Rows drawn: the newest calls, so the table stays short above the tools. */
const shown = 10;

export function readHistory(): HistoryEntry[] {
  try {
    return JSON.parse(sessionStorage.getItem(key) ?? "[]");
  } catch {
    return [];
  }
}

export function addHistory(entry: HistoryEntry): void {
  sessionStorage.setItem(key, JSON.stringify([entry, ...readHistory()].slice(0, kept)));
}

export function renderHistory(root: HTMLElement, rerun: (entry: HistoryEntry) => void): void {
  const list = readHistory();
  if (list.length === 0) {
    root.replaceChildren(h("p", { class: "muted" }, "No calls yet."));
    return;
  }
  root.replaceChildren(
    h(
      "table",
      {},
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, "When"),
          h("th", {}, "Tool"),
          h("th", {}, "Arguments"),
          h("th", {}, "Outcome"),
          h("th", {}, "Time"),
          h("th", {}, h("span", { class: "visually-hidden" }, "Actions")),
        ),
      ),
      h(
        "tbody",
        {},
        list.slice(0, shown).map((entry, index) =>
          h(
            "tr",
            { "data-call": index },
            h("td", {}, new Date(entry.at).toLocaleTimeString()),
            h("td", {}, h("code", {}, entry.tool)),
            h("td", {}, h("code", { class: "clip" }, JSON.stringify(entry.args))),
            h("td", {}, statusBadge(entry.ok ? "ok" : "error")),
            h("td", {}, `${entry.ms} ms`),
            h(
              "td",
              {},
              h(
                "button",
                {
                  type: "button",
                  class: "secondary rerun",
                  "aria-label": `Run again: ${entry.tool} with these arguments`,
                  onclick: () => rerun(entry),
                },
                "Run again",
              ),
            ),
          ),
        ),
      ),
    ),
    ...(list.length > shown
      ? [h("p", { class: "muted" }, `The newest ${shown} of ${list.length} calls.`)]
      : []),
  );
}
