/**
 * Memory: a scope's memories listed (newest first, by kind, a page at a time with "More" where the
 * memory module serves `memory_list`) or searched, one added (the list is read again so it shows), one
 * read in full and deleted.
 */
import { api, callOrThrow, type Json } from "./api.ts";
import { h, messageOf } from "./dom.ts";
import { showMemory } from "./memory-detail.ts";

const kinds = ["fact", "preference", "episode", "procedure", "summary"] as const;
const scopeFields = ["userId", "agentId", "sessionId"] as const;
/** The tool that lists without a query, where the memory module serves one. */
const listTool = "memory.memory_list";
/** Memories per page of the listing. */
const pageSize = 20;

interface Hit {
  readonly id: string;
  readonly text: string;
  readonly kind: string;
  readonly date?: string;
  readonly score?: number;
}

/** A hit as the tools answer it: { id, text, kind, date, score }, or a whole record { memory, score }. */
function asHit(item: Json): Hit {
  const memory = item.memory ?? (item.content !== undefined ? item : undefined);
  if (memory === undefined) return item;
  return {
    id: memory.id,
    text: memory.content,
    kind: memory.kind,
    date: memory.createdAt ?? memory.date,
    ...(typeof item.score === "number" ? { score: item.score } : {}),
  };
}

/** A text field with its label. */
function input(id: string, label: string) {
  const element = h("input", { id, type: "text" });
  return { field: h("div", { class: "field" }, h("label", { for: id }, label), element), element };
}

export function memoryPage(root: HTMLElement): undefined {
  const results = h("div", { id: "memories", "aria-live": "polite" });
  const detail = h("section", { id: "memory-detail" });
  const notice = h("p", { class: "error", role: "alert" });
  const query = input("memory-query", "Search for (empty: list the newest)");
  const scope = scopeFields.map((name) => ({ name, ...input(`memory-${name}`, `Scope: ${name}`) }));
  const content = input("memory-content", "Remember this");
  const kind = h(
    "select",
    { id: "memory-kind" },
    h("option", { value: "" }, "every kind"),
    kinds.map((name) => h("option", { value: name }, name)),
  );
  const addKind = h(
    "select",
    { id: "memory-add-kind" },
    kinds.map((name) => h("option", { value: name }, name)),
  );
  /** What the list shows now, read again after an add or a delete. */
  let shown: () => Promise<void> = async () => {};
  const currentScope = (): Record<string, string> =>
    Object.fromEntries(
      scope.map(({ name, element }) => [name, element.value.trim()]).filter(([, value]) => value !== ""),
    );
  // No scope field filled in: the whole tenant, asked for in so many words (the service reads every
  // scope only when told to).
  const scopeArgs = () => {
    const named = currentScope();
    return Object.keys(named).length === 0 ? { wholeTenant: true } : named;
  };

  const { search, list } = memoryResults({
    results,
    notice,
    kind,
    scopeArgs,
    currentScope,
    open: (id) => open(id),
  });

  const find = async () => {
    notice.textContent = "";
    const text = query.element.value.trim();
    shown = text === "" ? list : () => search(text);
    try {
      await shown();
    } catch (error) {
      notice.textContent = messageOf(error);
    }
  };
  const refreshShown = async () => {
    try {
      await shown();
    } catch (error) {
      notice.textContent = messageOf(error);
    }
  };
  const open = (id: string) => showMemory(id, detail, notice, refreshShown);

  root.append(
    h("h1", {}, "Memory"),
    h(
      "form",
      {
        class: "card",
        id: "memory-search",
        onsubmit: (event) => {
          event.preventDefault();
          void find();
        },
      },
      query.field,
      h(
        "div",
        { class: "row" },
        scope.map(({ field }) => field),
        h("div", { class: "field" }, h("label", { for: "memory-kind" }, "Kind"), kind),
      ),
      h("p", { class: "muted" }, "With every scope field empty, the whole tenant is read."),
      h("button", { type: "submit" }, "Search"),
    ),
    h(
      "form",
      {
        class: "card",
        id: "memory-add",
        onsubmit: async (event) => {
          event.preventDefault();
          notice.textContent = "";
          try {
            const added = await callOrThrow("memory.memory_add", {
              ...currentScope(),
              content: content.element.value,
              kind: addKind.value,
            });
            content.element.value = "";
            await open(added.memory?.id ?? added.id);
            // The list shown is read again: the new memory is in it when it matches.
            await refreshShown();
          } catch (error) {
            notice.textContent = messageOf(error);
          }
        },
      },
      h(
        "div",
        { class: "row" },
        content.field,
        h("div", { class: "field" }, h("label", { for: "memory-add-kind" }, "Its kind"), addKind),
      ),
      h("button", { type: "submit", class: "secondary" }, "Add a memory in this scope"),
    ),
    notice,
    results,
    detail,
  );
  void find();
  return undefined;
}

/** What the listing shows and how it is read: a search, or the scope's memories a page at a time. */
interface ResultsContext {
  readonly results: HTMLElement;
  readonly notice: HTMLElement;
  readonly kind: HTMLSelectElement;
  scopeArgs(): Record<string, unknown>;
  currentScope(): Record<string, string>;
  open(id: string): unknown;
}

function memoryResults({ results, notice, kind, scopeArgs, currentScope, open }: ResultsContext) {
  let lister: Promise<boolean> | undefined;
  const canList = () => {
    lister ??= api("/api/modules")
      .then((answer: Json) =>
        answer.modules.some(
          (info: Json) =>
            info.module === "memory" && info.tools.some((tool: Json) => `memory.${tool.name}` === listTool),
        ),
      )
      .catch(() => false);
    return lister;
  };

  const kindArgs = () => (kind.value === "" ? {} : { kinds: [kind.value] });

  const item = (hit: Hit) =>
    h(
      "li",
      { "data-memory": hit.id, "data-kind": hit.kind },
      h("button", { type: "button", class: "link", onclick: () => open(hit.id) }, hit.text),
      " ",
      h(
        "span",
        { class: "muted" },
        [hit.kind, hit.date ?? "", hit.score === undefined ? "" : `score ${hit.score.toFixed(3)}`]
          .filter(Boolean)
          .join(" · "),
      ),
    );
  const draw = (hits: readonly Hit[], empty: string) => {
    if (hits.length === 0) {
      results.replaceChildren(h("p", { class: "muted" }, empty));
      return;
    }
    results.replaceChildren(h("ul", { class: "memories" }, hits.map(item)));
  };

  const search = async (text: string) => {
    const found = await callOrThrow("memory.memory_search", {
      ...scopeArgs(),
      ...kindArgs(),
      query: text,
      limit: 20,
    });
    delete results.dataset.listing;
    draw(found.results.map(asHit), "Nothing found in this scope.");
  };

  /** A page of `memory_list` (the first, or the one after `cursor`), with "More" while more follow. */
  const listPage = async (cursor?: string) => {
    const page = await callOrThrow(listTool, {
      ...scopeArgs(),
      ...(kind.value === "" ? {} : { kind: kind.value }),
      limit: pageSize,
      ...(cursor === undefined ? {} : { cursor }),
    });
    const hits: Hit[] = (page.memories ?? page.results ?? page.items ?? []).map(asHit);
    if (cursor === undefined) draw(hits, "No memories in this scope yet.");
    else results.querySelector("ul.memories")?.append(...hits.map(item));
    results.querySelector('[data-listing="more"]')?.remove();
    results.dataset.listing = "paged";
    const shownCount = results.querySelectorAll("ul.memories li").length;
    if (typeof page.nextCursor === "string") {
      results.append(
        h(
          "p",
          { "data-listing": "more" },
          h("span", { class: "muted" }, `${shownCount} shown, newest first; more follow. `),
          h(
            "button",
            {
              type: "button",
              class: "secondary",
              onclick: async (event: Event) => {
                (event.currentTarget as HTMLButtonElement).disabled = true;
                try {
                  await listPage(page.nextCursor);
                } catch (error) {
                  notice.textContent = messageOf(error);
                }
              },
            },
            "More",
          ),
        ),
      );
    }
  };

  const list = async () => {
    if (await canList()) {
      await listPage();
      return;
    }
    // No list tool: the scope's state names its newest memories (five), filtered here by kind.
    const state = await callOrThrow("memory.memory_state_unified", currentScope());
    const hits: Hit[] = (state.recentMemories ?? []).map(asHit);
    results.dataset.listing = "recent";
    draw(
      hits.filter((hit) => kind.value === "" || hit.kind === kind.value),
      "No memories in this scope yet.",
    );
    results.prepend(
      h(
        "p",
        { class: "muted", "data-listing": "recent" },
        `The newest memories of this scope (${state.counts?.memories?.active ?? hits.length} active; without a query the memory module names its five newest): type something to search them all.`,
      ),
    );
  };

  return { search, list };
}
