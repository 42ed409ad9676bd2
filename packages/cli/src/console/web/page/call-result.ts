/**
 * A tool call from its panel, made as an MCP client makes it (`/api/call/stream`), and what a person
 * reads of it: the outcome with the round trip, a live pane of the call's progress and log
 * notifications, the result's `structuredContent` beside the tool's output schema, and the raw
 * JSON-RPC exchange.
 */
import { type CallAnswer, callTool, type Issue, type Json, type ToolErrorData } from "./api.ts";
import { h, json, messageOf } from "./dom.ts";
import type { ToolInfo } from "./modules-page.ts";

export type ShownAnswer = (
  | { readonly ok: true; readonly output: unknown }
  | { readonly ok: false; readonly error: ToolErrorData }
) & { readonly ms: number; readonly roundTrip: number };

interface RpcMessage {
  readonly direction: "sent" | "received";
  readonly at: number;
  readonly message: Json;
}

/** A progress or log notification as one line of the live pane; undefined for any other message. */
function liveLine(message: Json): HTMLElement | undefined {
  const params = message.params ?? {};
  if (message.method === "notifications/progress") {
    const of = params.total === undefined ? "" : `/${params.total}`;
    return h(
      "li",
      { class: "progress", "data-live": "progress" },
      `progress ${params.progress}${of}`,
      params.message ? `: ${params.message}` : "",
    );
  }
  if (message.method === "notifications/message") {
    const data = typeof params.data === "string" ? params.data : JSON.stringify(params.data);
    return h(
      "li",
      { class: `log log-${params.level}`, "data-live": "log" },
      h("span", { class: "level" }, params.level),
      params.logger ? ` ${params.logger}` : "",
      ` ${data}`,
    );
  }
  return undefined;
}

function rpcItem(entry: RpcMessage): HTMLElement {
  const arrow = entry.direction === "sent" ? "→ sent" : "← received";
  const what = entry.message.method ?? (entry.message.error === undefined ? "result" : "error");
  return h(
    "li",
    { "data-direction": entry.direction },
    h("span", { class: "muted" }, `${arrow} at ${entry.at} ms · ${what}`),
    h("pre", { class: "data" }, json(entry.message)),
  );
}

/** The tool's output schema, or why there is none to show. */
function outputSchemaView(tool: ToolInfo): HTMLElement[] {
  return [
    h("h4", {}, "Output schema"),
    tool.outputSchema === undefined
      ? h("p", { class: "muted", "data-output-schema": "none" }, "This tool declares no output schema.")
      : h("pre", { class: "data", "data-output-schema": "" }, json(tool.outputSchema)),
  ];
}

/**
 * Calls `tool` with `args`, filling `root` as the call goes on; issues of a refused input go to
 * `place` (beside the form's fields), those it cannot place are listed. Undefined when the call got no
 * answer (the reason is shown).
 */
export async function callAndShow(
  qualified: string,
  args: unknown,
  root: HTMLElement,
  tool: ToolInfo,
  place: (issues: readonly Issue[]) => Issue[],
): Promise<ShownAnswer | undefined> {
  const status = h("p", { class: "muted" }, "Calling…");
  const outcome = h("div", { class: "outcome" });
  const live = h("ol", { class: "live" });
  const liveNote = h("p", { class: "muted" }, "Nothing reported yet.");
  const rpc = h("ol", { class: "rpc" });
  const rpcSummary = h("summary", {}, "JSON-RPC exchange");
  root.replaceChildren(
    status,
    outcome,
    h(
      "section",
      { class: "live-pane", "aria-label": `Progress and log of ${qualified}` },
      h("h4", {}, "Progress and log"),
      liveNote,
      live,
    ),
    h("details", { class: "rpc-exchange" }, rpcSummary, rpc),
  );
  let count = 0;
  let answer: CallAnswer;
  // What the person waited for is the round trip; the tool's own time is said beside it.
  const sent = performance.now();
  try {
    answer = await callTool(qualified, args, (value: RpcMessage) => {
      rpc.append(rpcItem(value));
      rpcSummary.textContent = `JSON-RPC exchange (${++count} messages)`;
      const line = liveLine(value.message);
      if (line !== undefined) {
        live.append(line);
        liveNote.hidden = true;
      }
    });
  } catch (error) {
    status.className = "error";
    status.textContent = messageOf(error);
    return undefined;
  }
  const roundTrip = Math.round((performance.now() - sent) * 10) / 10;
  const timing = `${roundTrip} ms round trip (the tool took ${answer.ms} ms)`;
  if (liveNote.hidden === false)
    liveNote.textContent = "The tool reported no progress and wrote no log line.";
  const structured = answer.result?.structuredContent;
  const structuredView = [
    h("h4", {}, "structuredContent"),
    structured === undefined
      ? h("p", { class: "muted", "data-structured": "none" }, "The result carries no structuredContent.")
      : h("pre", { class: "data", "data-structured": "" }, json(structured)),
  ];
  if (answer.ok) {
    status.className = "ok";
    status.textContent = `Result in ${timing}`;
    outcome.replaceChildren(
      h("pre", { class: "data", "data-result": "ok" }, json(answer.output)),
      h("div", { class: "structured" }, h("div", {}, structuredView), h("div", {}, outputSchemaView(tool))),
    );
  } else {
    const error: ToolErrorData = answer.error;
    const unplaced = error.code === "invalid_input" ? place(error.data?.issues ?? []) : [];
    status.className = "error";
    status.textContent = `Error ${error.code} in ${timing}`;
    outcome.replaceChildren(
      ...unplaced.map((issue) =>
        h("p", { class: "error" }, `${issue.path.join(".") || "(input)"}: ${issue.message}`),
      ),
      h("pre", { class: "data", "data-result": "error" }, json(error)),
    );
  }
  return { ...answer, roundTrip };
}
