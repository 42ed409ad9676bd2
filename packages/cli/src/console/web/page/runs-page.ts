/**
 * Durable runs: the threads table (read every 3 s) and the thread picked (run-detail.ts). The runs are
 * the demo agent's (started here) or, with `tackle serve --durable-url`, another durable server's, whose
 * paused runs are approved here the same way.
 */
import { api, type Json } from "./api.ts";
import { h, messageOf, statusBadge } from "./dom.ts";
import { showRun } from "./run-detail.ts";

export function runsPage(root: HTMLElement): () => void {
  const list = h("tbody");
  const detail = h("section", { id: "run", "aria-labelledby": "run-heading" });
  const notice = h("p", { class: "error", role: "alert" });
  let shown: { close(): void } | undefined;

  const intro = h("p", {});
  const startButton = h(
    "button",
    {
      type: "button",
      id: "start-demo",
      onclick: async () => {
        notice.textContent = "";
        try {
          const { threadId } = await api("/api/runs", { method: "POST", body: {} });
          await refresh();
          select(threadId, "demo-refund");
        } catch (error) {
          notice.textContent = messageOf(error);
        }
      },
    },
    "Start the demo agent",
  );
  let remote = false;
  const refresh = async () => {
    const { runs, source } = await api("/api/runs");
    remote = source?.kind === "remote";
    startButton.hidden = remote;
    intro.textContent = remote
      ? `The runs of the durable server at ${source.url}: open a paused one to approve, edit or reject what it waits for.`
      : "The demo agent follows a scripted model (no hosted LLM): it looks an order up, then asks you to approve a refund. The card number is redacted everywhere you see it.";
    list.replaceChildren(
      ...runs.map((run: Json) =>
        h(
          "tr",
          { "data-thread": run.threadId },
          h(
            "th",
            { scope: "row" },
            h(
              "a",
              {
                href: `#/runs/${run.threadId}`,
                onclick: (event: Json) => {
                  event.preventDefault();
                  select(run.threadId, run.graph);
                },
              },
              run.threadId,
            ),
          ),
          h("td", {}, run.graph),
          h("td", {}, run.orderId || summary(run.state)),
          h("td", {}, statusBadge(run.status)),
          h("td", {}, run.state?.outcome ?? ""),
        ),
      ),
    );
    if (runs.length === 0)
      list.replaceChildren(
        h(
          "tr",
          {},
          h(
            "td",
            { colspan: 5, class: "muted" },
            remote ? "No runs yet." : "No runs yet: start the demo agent.",
          ),
        ),
      );
  };
  const select = (threadId: string, graph: string) => {
    shown?.close();
    shown = showRun(
      detail,
      threadId,
      () => {
        refresh().catch(() => {});
      },
      graph,
    );
  };

  root.append(
    h("h1", {}, "Durable runs"),
    intro,
    startButton,
    notice,
    h("h2", {}, "Threads"),
    h(
      "table",
      { id: "runs" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, "Thread"),
          h("th", {}, "Graph"),
          h("th", {}, "Input"),
          h("th", {}, "Status"),
          h("th", {}, "Outcome"),
        ),
      ),
      list,
    ),
    detail,
  );
  refresh().catch((error: unknown) => {
    notice.textContent = messageOf(error);
  });
  const timer = setInterval(() => refresh().catch(() => {}), 3000);
  return () => {
    clearInterval(timer);
    shown?.close();
  };
}

/** A run's input in a few words, for a graph that is not the demo's: its first short string fields. */
function summary(state: Json): string {
  if (state === null || typeof state !== "object") return "";
  return Object.entries(state)
    .filter(([key, value]) => typeof value === "string" && value.length <= 40 && key !== "outcome")
    .slice(0, 2)
    .map(([key, value]) => `${key}: ${value}`)
    .join(", ");
}
