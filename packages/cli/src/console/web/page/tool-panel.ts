/**
 * A tool's panel: its name and description; when first opened, a form drawn from its input schema with
 * a JSON editor beside it (the two kept in sync), a Call button, and the answer.
 */
import { addHistory } from "./call-history.ts";
import { callAndShow } from "./call-result.ts";
import { h, json } from "./dom.ts";
import type { ToolInfo } from "./modules-page.ts";
import { buildForm, type Schema, type SchemaForm } from "./schema-form.ts";

export interface ToolPanel {
  readonly element: HTMLDetailsElement;
  readonly description: string;
  /** Opens the panel, fills it in with `args` and calls the tool with them. */
  run(args: unknown): Promise<void>;
}

export function toolPanel(qualified: string, tool: ToolInfo, onCalled: () => void): ToolPanel {
  const element = h(
    "details",
    { class: "tool card", "data-tool": qualified },
    h("summary", {}, h("code", {}, qualified), " ", h("span", { class: "muted" }, tool.description)),
  );
  let controls: ReturnType<typeof toolForm> | undefined;
  const build = () => {
    if (controls !== undefined) return controls;
    element.dataset.built = "";
    controls = toolForm(qualified, tool, onCalled);
    element.append(controls.element);
    return controls;
  };
  element.addEventListener("toggle", () => {
    if (element.open) build();
  });
  return {
    element,
    description: tool.description,
    async run(args) {
      element.open = true;
      const built = build();
      built.fill(args);
      element.scrollIntoView({ block: "start" });
      await built.call();
    },
  };
}

function toolForm(qualified: string, tool: ToolInfo, onCalled: () => void) {
  const id = qualified.replace(/[^\w-]/g, "-");
  const schema: Schema = tool.inputSchema ?? { type: "object" };
  const args = argsEditor(schema, id);
  const { formSlot, editor, editorError, editorId, fill } = args;
  const result = h("div", { class: "result", "aria-live": "polite" });
  const button = h("button", { type: "submit" }, "Call");

  const call = async () => {
    args.form().clearErrors();
    const input = args.readArgs(result);
    if (input === undefined) return;
    button.disabled = true;
    try {
      const answer = await callAndShow(qualified, input, result, tool, (issues) =>
        args.form().showIssues(issues),
      );
      if (answer === undefined) return;
      addHistory({
        tool: qualified,
        args: input,
        ok: answer.ok,
        ms: answer.roundTrip,
        at: new Date().toISOString(),
      });
      onCalled();
    } finally {
      button.disabled = false;
    }
  };

  const element = h(
    "div",
    { class: "tool-body" },
    h(
      "form",
      {
        novalidate: true,
        onsubmit: (event) => {
          event.preventDefault();
          void call();
        },
      },
      h(
        "div",
        { class: "args" },
        formSlot,
        h(
          "div",
          { class: "field json-editor" },
          h("label", { for: editorId }, "Arguments as JSON (kept in step with the form)"),
          editor,
          editorError,
        ),
      ),
      button,
    ),
    result,
  );
  return { element, fill, call };
}

/** The schema's form and a JSON editor beside it, kept in step: the side edited last is called with. */
function argsEditor(schema: Schema, id: string) {
  let form: SchemaForm = buildForm(schema, id);
  const formSlot = h("div", { class: "form-slot" }, form.element);
  const editorId = `${id}-json`;
  const editor = h("textarea", {
    id: editorId,
    class: "mono json-args",
    rows: 10,
    spellcheck: "false",
    "aria-describedby": `${editorId}-error`,
  });
  const editorError = h("p", { class: "field-error", id: `${editorId}-error`, "aria-live": "polite" });
  /** Which side the person edited last: its value is the one called with. */
  let edited: "form" | "json" = "form";

  const formValue = () => form.read() ?? {};
  const syncEditor = () => {
    try {
      editor.value = json(formValue());
      editorError.textContent = "";
    } catch {
      // A JSON field of the form holds no JSON yet: the editor keeps its last value.
    }
  };
  const fill = (value: unknown) => {
    form = buildForm(schema, id, value);
    formSlot.replaceChildren(form.element);
    editor.value = json(value ?? {});
    editorError.textContent = "";
    edited = "form";
  };
  formSlot.addEventListener("input", () => {
    edited = "form";
    syncEditor();
  });
  formSlot.addEventListener("change", () => {
    edited = "form";
    syncEditor();
  });
  // Array rows added or removed change the value without an input event.
  formSlot.addEventListener("click", (event) => {
    if ((event.target as Element).closest("button") !== null) queueMicrotask(syncEditor);
  });
  editor.addEventListener("input", () => {
    edited = "json";
    try {
      const value = JSON.parse(editor.value);
      editorError.textContent = "";
      // The form follows the editor (without taking focus): drawn again with the parsed value.
      form = buildForm(schema, id, value);
      formSlot.replaceChildren(form.element);
    } catch (error) {
      editorError.textContent = `Not valid JSON: ${(error as Error).message}`;
    }
  });
  syncEditor();

  /** The arguments to call with, or undefined (with the reason shown) when they cannot be read. */
  const readArgs = (result: HTMLElement): unknown => {
    if (edited === "json") {
      try {
        return JSON.parse(editor.value);
      } catch (error) {
        editorError.textContent = `Not valid JSON: ${(error as Error).message}`;
        result.replaceChildren(
          h("p", { class: "error" }, "The arguments in the JSON editor are not valid JSON: fix them first."),
        );
        return undefined;
      }
    }
    try {
      return formValue();
    } catch (error) {
      result.replaceChildren(h("p", { class: "error" }, (error as Error).message));
      return undefined;
    }
  };

  return { formSlot, editor, editorError, editorId, fill, readArgs, form: () => form };
}
