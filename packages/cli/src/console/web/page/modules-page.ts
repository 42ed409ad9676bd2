/**
 * Modules and tools: the modules' live status, the calls made from this tab (above the tools, each one
 * re-runnable), and a panel per tool, filtered by a search field.
 */
import { api, type Json } from "./api.ts";
import { type HistoryEntry, renderHistory } from "./call-history.ts";
import { h, statusBadge } from "./dom.ts";
import type { Schema } from "./schema-form.ts";
import { type ToolPanel, toolPanel } from "./tool-panel.ts";

export interface ToolInfo {
  readonly name: string;
  readonly description: string;
  readonly inputSchema?: Schema;
  readonly outputSchema?: Schema;
}

export interface ModuleInfo {
  readonly module: string;
  readonly status: string;
  readonly node?: string;
  readonly tools: readonly ToolInfo[];
  readonly errors: readonly { readonly source: string; readonly message: string }[];
}

type Listener = (modules: readonly ModuleInfo[], problem?: string) => void;

let events: EventSource | undefined;
let modules: readonly ModuleInfo[] = [];
/** What is wrong with the source itself (the broker down): shown once, above the table. */
let sourceErrors: readonly { source: string; message: string }[] = [];
const moduleListeners = new Set<Listener>();

function startEvents(): void {
  if (events !== undefined) return;
  events = new EventSource("/api/events");
  events.addEventListener("modules", (event) => {
    const data: Json = JSON.parse((event as MessageEvent<string>).data);
    modules = data.modules;
    sourceErrors = data.errors ?? [];
    for (const listener of moduleListeners) listener(modules);
  });
  events.addEventListener("error", () => {
    for (const listener of moduleListeners)
      listener(modules, "The live status stream dropped; reconnecting…");
  });
}

export function stopEvents(): void {
  events?.close();
  events = undefined;
}

const table = (id: string, headings: readonly string[], body: HTMLElement) =>
  h(
    "table",
    { id },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        headings.map((text) => h("th", {}, text)),
      ),
    ),
    body,
  );

export function modulesPage(root: HTMLElement): () => void {
  startEvents();
  const statusTable = h("tbody");
  const streamNote = h("p", { class: "muted", role: "status" });
  const sourceNote = h("div", { id: "source-errors", role: "alert" });
  const toolsRoot = h("div", { class: "tools" });
  const history = h("div", { id: "history" });
  const search = h("input", { id: "tool-search", type: "search", autocomplete: "off" });
  const searchNote = h("p", { class: "muted", id: "tool-search-note", role: "status" });
  const panels = new Map<string, ToolPanel>();
  let shownTools = "";

  const showHistory = () => renderHistory(history, rerun);
  const rerun = (entry: HistoryEntry) => {
    const panel = panels.get(entry.tool);
    if (panel === undefined) {
      searchNote.textContent = `${entry.tool} is not served now: it cannot be run again.`;
      return;
    }
    search.value = "";
    filter();
    void panel.run(entry.args);
  };
  const filter = () => {
    const words = search.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    let matching = 0;
    for (const [name, panel] of panels) {
      const text = `${name} ${panel.description}`.toLowerCase();
      const match = words.every((word) => text.includes(word));
      panel.element.hidden = !match;
      if (match) matching++;
    }
    searchNote.textContent =
      words.length === 0 ? `${panels.size} tools.` : `${matching} of ${panels.size} tools match.`;
  };
  search.addEventListener("input", filter);

  root.append(
    h("h1", {}, "Modules and tools"),
    h(
      "section",
      { "aria-labelledby": "modules-heading" },
      h("h2", { id: "modules-heading" }, "Modules"),
      streamNote,
      sourceNote,
      table("modules", ["Module", "Status", "Node", "Tools", "Errors"], statusTable),
    ),
    h(
      "section",
      { "aria-labelledby": "history-heading" },
      h("h2", { id: "history-heading" }, "Calls in this browser session"),
      history,
    ),
    h(
      "section",
      { "aria-labelledby": "tools-heading" },
      h("h2", { id: "tools-heading" }, "Tools"),
      h(
        "div",
        { class: "field search" },
        h("label", { for: "tool-search" }, "Search the tools (name or description)"),
        search,
      ),
      searchNote,
      toolsRoot,
    ),
  );

  const render: Listener = (list, problem) => {
    streamNote.textContent = problem ?? "Live: status updates without a reload.";
    sourceNote.replaceChildren(
      ...sourceErrors.map((error) => h("p", { class: "errors" }, `${error.source}: ${error.message}`)),
    );
    statusTable.replaceChildren(...list.map(statusRow));
    const signature = JSON.stringify(list.map((info) => [info.module, info.tools]));
    if (signature === shownTools) return;
    const first = shownTools === "";
    shownTools = signature;
    panels.clear();
    for (const info of list) {
      for (const tool of info.tools) {
        const name = `${info.module}.${tool.name}`;
        panels.set(name, toolPanel(name, tool, showHistory));
      }
    }
    toolsRoot.replaceChildren(...[...panels.values()].map((panel) => panel.element));
    filter();
    // For the first-load benchmark: when the modules and their tools were first on screen (a tool's
    // form is built when its panel is opened).
    if (first) performance.mark("tackle:modules-rendered");
  };
  moduleListeners.add(render);
  if (modules.length > 0) render(modules);
  else
    api("/api/modules")
      .then((answer: Json) => {
        sourceErrors = answer.errors ?? [];
        render(answer.modules);
      })
      .catch(() => {});
  showHistory();
  return () => {
    moduleListeners.delete(render);
  };
}

/** One module's row of the status table: its status, node, tool count and errors. */
function statusRow(info: (typeof modules)[number]): HTMLElement {
  return h(
    "tr",
    { "data-module": info.module },
    h("th", { scope: "row" }, info.module),
    h("td", {}, statusBadge(info.status)),
    h("td", {}, info.node ?? "this process"),
    h("td", {}, String(info.tools.length)),
    h(
      "td",
      { class: "errors" },
      info.errors.map((error) => h("div", {}, `${error.source}: ${error.message}`)),
    ),
  );
}
