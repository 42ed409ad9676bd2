/**
 * Documents: a timeline document drawn, an edit script previewed then committed, and the document's
 * change log, redrawn when another client changes it.
 */
import { callOrThrow, type Json } from "./api.ts";
import { h, json, messageOf } from "./dom.ts";
import { drawTimeline } from "./timeline.ts";

const sampleScript = `const track = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'caption');
const caption = entities.create({ entityKind: 'caption', payload: { text: 'Welcome!' } });
const clip = entities.create({ entityKind: 'clip' });
const marker = entities.create({ entityKind: 'sequence-marker', payload: { startMs: 3000, durationMs: 2000 } });
relations.link({ relationKind: 'marker', endpoint0EntityId: clip.entityId, endpoint1EntityId: marker.entityId });
relations.link({ relationKind: 'contain', endpoint0EntityId: clip.entityId, endpoint1EntityId: caption.entityId });
relations.link({ relationKind: 'contain', endpoint0EntityId: track.entityId, endpoint1EntityId: clip.entityId });`;

export function documentsPage(root: HTMLElement): () => void {
  const docId = h("input", { id: "doc-id", type: "text", value: "sample-timeline", required: true });
  const drawing = h("div", { id: "timeline", class: "card" });
  const log = h("ol", { id: "change-log", class: "change-log" });
  const logNote = h("p", { class: "muted", role: "status" });
  const older = h(
    "button",
    { type: "button", class: "secondary", id: "older-changes", hidden: true },
    "Older changes",
  );
  const notice = h("p", { class: "error", role: "alert" });

  // The document's own change log, as the document server keeps it (docscript.changes), newest first.
  let shownSeq: number | undefined;
  let olderCursor: string | undefined;
  const renderLog = (page: Json, append: boolean) => {
    const items = page.changes.map(changeItem);
    if (append) log.append(...items);
    else
      log.replaceChildren(
        ...(items.length === 0
          ? [h("li", { class: "muted" }, "No changes stored for this document yet.")]
          : items),
      );
    olderCursor = page.next_cursor;
    older.hidden = olderCursor === undefined;
  };
  // The document the page shows: the field may be edited meanwhile, until Open is pressed.
  let openedId = docId.value.trim();
  const readLog = () => callOrThrow("docscript.changes", { doc_id: openedId, limit: 20 });
  older.addEventListener("click", async () => {
    if (olderCursor === undefined) return;
    try {
      renderLog(
        await callOrThrow("docscript.changes", {
          doc_id: openedId,
          limit: 20,
          cursor: olderCursor,
        }),
        true,
      );
    } catch (error) {
      logNote.textContent = messageOf(error);
    }
  });

  const open = async () => {
    notice.textContent = "";
    const id = docId.value.trim();
    try {
      const snapshot = await readDocument(id);
      if (id !== openedId) {
        openedId = id;
        shownSeq = undefined;
      }
      drawing.replaceChildren(
        drawTimeline(snapshot),
        h(
          "p",
          { class: "muted" },
          `Version ${snapshot.version.slice(0, 24)} · ${snapshot.total.entities} entities, ${snapshot.total.relations} relations${snapshot.partial ? ` (first ${snapshot.entities.length} drawn)` : ""}`,
        ),
      );
      drawing.dataset.version = snapshot.version;
    } catch (error) {
      notice.textContent = messageOf(error);
      return;
    }
    // The log apart: a drawing stays drawn when the log cannot be read (a module without docscript.changes).
    try {
      const page = await readLog();
      shownSeq = page.changes[0]?.seq ?? 0;
      renderLog(page, false);
      logNote.textContent = "From the document server, newest first; checked every 3 s.";
    } catch (error) {
      logNote.textContent = `The change log could not be read: ${messageOf(error)}`;
    }
  };

  root.append(
    h("h1", {}, "Documents"),
    h(
      "form",
      {
        class: "row card",
        onsubmit: (event) => {
          event.preventDefault();
          void open();
        },
      },
      h("div", { class: "field" }, h("label", { for: "doc-id" }, "Document"), docId),
      h("button", { type: "submit" }, "Open"),
    ),
    notice,
    drawing,
    scriptEditor(docId, notice, open),
    h(
      "section",
      { class: "card", "aria-labelledby": "log-heading" },
      h("h2", { id: "log-heading" }, "Change log"),
      logNote,
      log,
      older,
    ),
  );
  void open();
  return watchLog(readLog, () => shownSeq, open);
}

/**
 * Another client's change (an agent, a script, another console) redraws the page: the log's newest
 * entry is checked every 3 s, and the drawing and the log are read again when it moved.
 */
function watchLog(
  readLog: () => Promise<Json>,
  shownSeq: () => number | undefined,
  open: () => Promise<void>,
): () => void {
  let checking = false;
  const timer = setInterval(async () => {
    if (checking || shownSeq() === undefined) return;
    checking = true;
    try {
      const page = await readLog();
      if ((page.changes[0]?.seq ?? 0) !== shownSeq()) await open();
    } catch {
      // The next tick tries again; open() says what is wrong when the person asks.
    } finally {
      checking = false;
    }
  }, 3000);
  return () => clearInterval(timer);
}

/** The edit script: run in the sandbox for a preview, then committed; `reopen` redraws the document. */
function scriptEditor(
  docId: HTMLInputElement,
  notice: HTMLElement,
  reopen: () => Promise<void>,
): HTMLElement {
  const script = h("textarea", { id: "edit-script", rows: 9, class: "mono" }, sampleScript);
  const preview = h("div", { id: "preview", "aria-live": "polite" });
  const commit = h("button", { type: "button", id: "commit-plan", disabled: true }, "Commit");
  let plan: Json;

  const run = async () => {
    notice.textContent = "";
    commit.disabled = true;
    // What the last run or commit said is not this run's answer: it goes before this one is asked.
    plan = undefined;
    preview.replaceChildren(h("p", { class: "muted" }, "Running the script…"));
    try {
      const answer = await callOrThrow("docscript.edit", {
        op: "run-edit-script",
        doc_id: docId.value.trim(),
        script: script.value,
      });
      plan = answer;
      const counts = answer.preview.counts;
      preview.replaceChildren(
        h("h3", {}, "Preview"),
        h(
          "p",
          { "data-preview": "counts" },
          Object.entries(counts)
            .map(([name, count]) => `${count} ${name}`)
            .join(", "),
        ),
        h("pre", { class: "data" }, json(answer.preview.changes ?? answer.preview)),
        ...(answer.logs?.length > 0 ? [h("pre", { class: "data" }, json(answer.logs))] : []),
      );
      commit.disabled = false;
    } catch (error) {
      preview.replaceChildren(
        h("h3", {}, "The script failed"),
        h("p", { class: "error", "data-preview": "error" }, messageOf(error)),
      );
    }
  };

  commit.addEventListener("click", async () => {
    if (plan === undefined) return;
    commit.disabled = true;
    try {
      const outcome = await callOrThrow("docscript.edit", {
        op: "commit-plan",
        doc_id: plan.doc_id,
        plan_id: plan.plan_id,
      });
      if (outcome.status !== "committed") {
        // Conflicted, rejected or unconfirmed: said as such, with the reasons; the plan stays for a retry.
        preview.replaceChildren(
          h("p", { class: "error" }, `Not committed: ${outcome.status}`),
          h("pre", { class: "data" }, json(outcome)),
        );
        commit.disabled = outcome.status !== "unconfirmed";
        await reopen();
        return;
      }
      preview.replaceChildren(
        h(
          "p",
          { class: "ok", "data-committed": plan.plan_id },
          `Committed plan ${plan.plan_id} (version ${outcome.version.slice(0, 24)})`,
        ),
      );
      plan = undefined;
      await reopen();
    } catch (error) {
      notice.textContent = messageOf(error);
    }
  });

  return h(
    "section",
    { class: "card", "aria-labelledby": "script-heading" },
    h("h2", { id: "script-heading" }, "Edit script"),
    h(
      "label",
      { for: "edit-script" },
      "Script (runs in the sandbox on the current document; nothing is published until you commit)",
    ),
    script,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", id: "run-script", class: "secondary", onclick: run }, "Preview"),
      commit,
    ),
    preview,
  );
}

/** One change log entry: seq, time, who, what it changed, and the plan it committed. */
function changeItem(change: Json): HTMLElement {
  const counts = (noun: string, plural: string, { created, changed, deleted }: Json) => {
    const parts = [
      created > 0 ? `${created} created` : undefined,
      changed > 0 ? `${changed} changed` : undefined,
      deleted > 0 ? `${deleted} deleted` : undefined,
    ].filter(Boolean);
    if (parts.length === 0) return undefined;
    return `${created + changed + deleted === 1 ? noun : plural}: ${parts.join(", ")}`;
  };
  const summary =
    [counts("entity", "entities", change.entities), counts("relation", "relations", change.relations)]
      .filter(Boolean)
      .join("; ") || "no entity or relation changed";
  const who = change.actor ?? `peer ${change.peers.join(", ")}`;
  return h(
    "li",
    { "data-seq": change.seq },
    h("span", { class: "seq" }, `#${change.seq}`),
    " ",
    h("time", { datetime: change.at }, new Date(change.at).toLocaleTimeString()),
    ` · ${who} (${change.credential === "host" ? "host credential" : "document token"}) · ${summary}`,
    change.status === "conflicted" ? " · stored past a conflict" : undefined,
    ...change.planIds.map((planId: string) => [" · plan ", h("code", { "data-plan": planId }, planId)]),
  );
}

/** Every page of a document's snapshot (the tool answers in token-budgeted pages with a cursor). */
async function readDocument(docId: string): Promise<Json> {
  const entities = [];
  const relations = [];
  let page = await callOrThrow("docscript.edit", { op: "snapshot", doc_id: docId });
  const first = page;
  entities.push(...page.entities);
  relations.push(...page.relations);
  for (let pages = 1; page.next_cursor !== undefined && pages < 50; pages++) {
    page = await callOrThrow("docscript.edit", { op: "snapshot", doc_id: docId, cursor: page.next_cursor });
    entities.push(...page.entities);
    relations.push(...page.relations);
  }
  return {
    version: first.version,
    total: first.total,
    entities,
    relations,
    partial: page.next_cursor !== undefined || first.truncated === true,
  };
}
