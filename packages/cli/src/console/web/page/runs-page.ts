/**
 * Durable runs: start the demo agent, the threads table (read every 3 s), and the thread picked
 * (run-detail.ts).
 */
import { api, type Json } from "./api.ts";
import { h, messageOf, statusBadge } from "./dom.ts";
import { showRun } from "./run-detail.ts";

export function runsPage(root: HTMLElement): () => void {
  const list = h("tbody");
  const detail = h("section", { id: "run", "aria-labelledby": "run-heading" });
  const notice = h("p", { class: "error", role: "alert" });
  let shown: { close(): void } | undefined;

  const refresh = async () => {
    const { runs } = await api("/api/runs");
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
                  select(run.threadId);
                },
              },
              run.threadId,
            ),
          ),
          h("td", {}, run.graph),
          h("td", {}, run.orderId),
          h("td", {}, statusBadge(run.status)),
          h("td", {}, run.state?.outcome ?? ""),
        ),
      ),
    );
    if (runs.length === 0)
      list.replaceChildren(
        h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No runs yet: start the demo agent.")),
      );
  };

  const select = (threadId: string) => {
    shown?.close();
    shown = showRun(detail, threadId, () => {
      refresh().catch(() => {});
    });
  };

  root.append(
    h("h1", {}, "Durable runs"),
    h(
      "p",
      {},
      "The demo agent follows a scripted model (no hosted LLM): it looks an order up, then asks you to approve a refund. The card number is redacted everywhere you see it.",
    ),
    h(
      "button",
      {
        type: "button",
        id: "start-demo",
        onclick: async () => {
          notice.textContent = "";
          try {
            const { threadId } = await api("/api/runs", { method: "POST", body: {} });
            await refresh();
            select(threadId);
          } catch (error) {
            notice.textContent = messageOf(error);
          }
        },
      },
      "Start the demo agent",
    ),
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
          h("th", {}, "Order"),
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
