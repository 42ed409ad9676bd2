/** One memory in full: its content, kind, status, scope, provenance and versions; delete after a confirmation. */
import { callOrThrow, type Json } from "./api.ts";
import { h, json, messageOf, statusBadge } from "./dom.ts";

const scopeNames = ["userId", "agentId", "sessionId", "tenantId", "appId", "runId"];

/**
 * Draws memory `id` into `detail`; a failure is said in `notice`; `changed` runs after a delete (the
 * list the person sees is read again).
 */
export async function showMemory(
  id: string,
  detail: HTMLElement,
  notice: HTMLElement,
  changed: () => Promise<void>,
): Promise<void> {
  const show = (other: string) => showMemory(other, detail, notice, changed);
  const reason = h("input", { id: "delete-reason", type: "text", value: "removed from the console" });
  try {
    const [{ memory }, history] = await Promise.all([
      callOrThrow("memory.memory_lifecycle_get", { id }),
      callOrThrow("memory.memory_lifecycle_history", { id }),
    ]);
    const confirmDialog: HTMLDialogElement = h(
      "dialog",
      { id: "confirm-delete", "aria-labelledby": "confirm-heading" },
      h("h3", { id: "confirm-heading" }, "Delete this memory?"),
      h("p", {}, "It leaves retrieval; its history remains."),
      h("div", { class: "field" }, h("label", { for: "delete-reason" }, "Reason"), reason),
      h(
        "div",
        { class: "actions" },
        h(
          "button",
          {
            type: "button",
            class: "danger",
            id: "confirm-delete-yes",
            onclick: async (): Promise<void> => {
              confirmDialog.close();
              try {
                await callOrThrow("memory.memory_lifecycle_delete", {
                  id,
                  reason: reason.value || undefined,
                });
                await show(id);
                await changed();
              } catch (error) {
                notice.textContent = messageOf(error);
              }
            },
          },
          "Delete",
        ),
        h("button", { type: "button", class: "secondary", onclick: () => confirmDialog.close() }, "Keep it"),
      ),
    );
    detail.replaceChildren(
      h("h2", {}, "Memory"),
      h(
        "dl",
        { class: "facts" },
        h("dt", {}, "Content"),
        h("dd", {}, memory.content),
        h("dt", {}, "Kind"),
        h("dd", {}, memory.kind),
        h("dt", {}, "Status"),
        h("dd", {}, statusBadge(memory.status)),
        h("dt", {}, "Version"),
        h("dd", {}, String(memory.version)),
        h("dt", {}, "Scope"),
        h(
          "dd",
          {},
          json(
            Object.fromEntries(
              scopeNames.filter((name) => memory[name] !== undefined).map((name) => [name, memory[name]]),
            ),
          ),
        ),
        h("dt", {}, "Provenance"),
        h("dd", {}, h("pre", { class: "data" }, json(memory.provenance))),
      ),
      h("h3", {}, "Versions"),
      versionsTable(history.versions),
      memory.status === "deleted"
        ? h("p", { class: "muted" }, "Deleted.")
        : h(
            "button",
            {
              type: "button",
              class: "danger",
              id: "delete-memory",
              onclick: () => confirmDialog.showModal(),
            },
            "Delete…",
          ),
      confirmDialog,
    );
  } catch (error) {
    notice.textContent = messageOf(error);
  }
}

/** A memory's versions, oldest first: what each change made of it, and why. */
function versionsTable(versions: readonly Json[]): HTMLElement {
  return h(
    "table",
    { id: "versions" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", {}, "Version"),
        h("th", {}, "Change"),
        h("th", {}, "Content"),
        h("th", {}, "Status"),
        h("th", {}, "Reason"),
        h("th", {}, "At"),
      ),
    ),
    h(
      "tbody",
      {},
      versions.map((version: Json) =>
        h(
          "tr",
          {},
          h("td", {}, String(version.version)),
          h("td", {}, version.change),
          h("td", {}, version.content),
          h("td", {}, version.status),
          h("td", {}, version.reason ?? ""),
          h("td", {}, version.at),
        ),
      ),
    ),
  );
}
