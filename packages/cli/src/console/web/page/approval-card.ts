/**
 * An approval's card: approve, cancel the run, reject with a reason, or edit the arguments in a form
 * drawn from the pending tool's input schema and approve those.
 */
import type { ApiError, Json } from "./api.ts";
import { h, messageOf, showData } from "./dom.ts";
import { buildForm, pointerIssues } from "./schema-form.ts";

/** Sends an answer to the paused run (an AG-UI resume); `cancel` ends the run instead. */
export interface Resume {
  (entry: { interruptId: string; status: string; payload?: unknown }): Promise<void>;
  cancel(reason: string): Promise<void>;
}

/**
 * An approval's card: the arguments as shown (redacted ones marked), approve, cancel, reject with a
 * reason, or edit the arguments in a form drawn from the pending tool's input JSON Schema (filled in with
 * the proposed arguments) and approve those. A refused edit puts the schema's messages beside the fields.
 * Without a schema the form can draw, the arguments are edited as JSON text.
 */
export function approvalCard(interrupt: Json, resume: Resume): HTMLElement {
  const request = interrupt.metadata?.request ?? {};
  const params = request.params ?? {};
  const baseId = `edit-${String(interrupt.id).replace(/[^\w-]/g, "-")}`;
  const reasonId = `reason-${String(interrupt.id).replace(/[^\w-]/g, "-")}`;
  const reason = h("input", { id: reasonId, type: "text" });
  const form = buildForm(request.inputSchema ?? { type: "object" }, baseId, params);
  const message = h("p", { class: "error", role: "alert" });
  const argsView = h("pre", { class: "data" });
  showData(argsView, params);
  const cancel = async () => {
    try {
      await resume.cancel("cancelled from the console");
    } catch (error) {
      message.textContent = messageOf(error);
    }
  };
  const answer = async (status: string, payload?: unknown) => {
    message.textContent = "";
    form.clearErrors();
    try {
      await resume({ interruptId: interrupt.id, status, ...(payload === undefined ? {} : { payload }) });
    } catch (error) {
      const refused = (error as ApiError).body?.error as Json;
      if (refused?.code === "invalid_edit" && Array.isArray(refused.data?.errors) && form.drawn) {
        // The schema's own messages, beside the fields they name; the rest under the card.
        const unplaced = form.showIssues(pointerIssues(refused.data.errors));
        // Each issue once, in the schema's words; never the interrupt's internal id.
        message.replaceChildren(
          "The edited arguments were refused by the tool's input schema",
          unplaced.length < refused.data.errors.length ? " (see beside the fields)." : ":",
          ...unplaced.map((issue) =>
            h("span", { class: "issue" }, ` ${issue.path.join(".") || "(arguments)"}: ${issue.message}`),
          ),
        );
      } else {
        message.textContent = messageOf(error);
      }
    }
  };
  return h(
    "article",
    { class: "card approval", "data-interrupt": interrupt.id },
    h("h3", {}, request.title ?? "Approval"),
    request.description ? h("p", {}, request.description) : undefined,
    h("p", {}, "Tool ", h("code", {}, request.toolName ?? "?"), " will run with:"),
    argsView,
    h(
      "div",
      { class: "actions" },
      h(
        "button",
        { type: "button", class: "approve", onclick: () => answer("resolved", { approved: true }) },
        "Approve",
      ),
      h(
        "button",
        {
          type: "button",
          class: "secondary cancel",
          onclick: () => cancel(),
        },
        "Cancel run",
      ),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: reasonId }, "Reason for rejecting"),
      reason,
      h(
        "button",
        {
          type: "button",
          class: "danger reject",
          onclick: () => answer("resolved", { approved: false, reason: reason.value || "rejected" }),
        },
        "Reject",
      ),
    ),
    h(
      "form",
      {
        class: "edit-args",
        novalidate: true,
        "aria-label": "Edit the arguments",
        "data-form": form.drawn ? "schema" : "json",
        onsubmit: (event) => {
          event.preventDefault();
          message.textContent = "";
          form.clearErrors();
          let edited: unknown;
          try {
            edited = form.read() ?? {};
          } catch (error) {
            message.textContent = `The edited arguments are not valid JSON (${messageOf(error)})`;
            return;
          }
          void answer("resolved", { approved: true, editedArgs: edited });
        },
      },
      h(
        "h4",
        {},
        form.drawn
          ? "Edit the arguments (redacted ones stay as they are)"
          : "Edit the arguments as JSON (redacted ones stay as they are)",
      ),
      form.element,
      h("button", { type: "submit", class: "secondary edit-approve" }, "Approve with these arguments"),
    ),
    message,
  );
}
