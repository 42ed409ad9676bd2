/**
 * One thread on the runs page: its AG-UI events (every run of it, in order) as tool call cards, the
 * approvals it waits for (answered as AG-UI resumes, or the run cancelled), and its history.
 */
import { ApiError, api, type Json, readSse } from "./api.ts";
import { approvalCard, type Resume } from "./approval-card.ts";
import { h, json, showData } from "./dom.ts";
import { runHistory } from "./run-history.ts";

interface Card {
  readonly element: HTMLElement;
  readonly status: HTMLElement;
  readonly name: HTMLElement;
  readonly args: HTMLElement;
  readonly result: HTMLElement;
}

/**
 * Draws thread `threadId` into `detail` and follows it; `onSettled` runs when a run of it pauses, ends
 * or fails (the threads table is read again). `close` stops following.
 */
export function showRun(
  detail: HTMLElement,
  threadId: string,
  onSettled: () => void,
  graph = "demo-refund",
): { close(): void } {
  let stream: EventSource | undefined;
  let lastEventId = "";
  const cardsRoot = h("div", { class: "cards" });
  const approvals = h("div", { class: "approvals" });
  const runStatus = h("p", { class: "run-status", role: "status" }, "Connecting…");
  const history = runHistory(threadId);
  detail.replaceChildren(
    h("h2", { id: "run-heading" }, `Run ${threadId}`),
    runStatus,
    approvals,
    h("h3", {}, "Tool calls"),
    cardsRoot,
    history.element,
  );

  // One handler for the AG-UI events, whether they come from the thread's stream or from a resume's answer.
  const handlers: Record<string, (event: Json) => void> = {
    RUN_STARTED: () => {
      runStatus.textContent = "Running";
      approvals.replaceChildren();
    },
    ...toolCallCards(cardsRoot),
    RUN_FINISHED: (event: Json) => {
      if (event.outcome?.type === "interrupt") {
        runStatus.textContent = "Paused: waiting for a person";
        approvals.replaceChildren(
          ...event.outcome.interrupts.map((interrupt: Json) => approvalCard(interrupt, resume)),
        );
      } else if (event.outcome?.type === "cancelled") {
        runStatus.textContent = "Cancelled";
      } else {
        runStatus.textContent = `Completed: ${json(event.result?.outcome ?? "done")}`;
        runStatus.dataset.state = "completed";
      }
      onSettled();
      history.refresh().catch(() => {});
    },
    RUN_ERROR: (event: Json) => {
      runStatus.textContent = `Failed: ${event.message}`;
      onSettled();
    },
  };
  const dispatch = (type: string, id: string, data: string) => {
    if (id) lastEventId = id;
    handlers[type]?.(JSON.parse(data));
  };

  // The thread's AG-UI events (every run of it, in order), from the event after the last one seen.
  const connect = () => {
    const after = lastEventId === "" ? "" : `?after=${encodeURIComponent(lastEventId)}`;
    stream = new EventSource(`/api/durable/ag-ui/threads/${encodeURIComponent(threadId)}/events${after}`);
    for (const type of Object.keys(handlers)) {
      stream.addEventListener(type, (event: Json) => {
        dispatch(type, event.lastEventId, event.data);
        if (type === "RUN_FINISHED" || type === "RUN_ERROR") stream?.close();
      });
    }
  };

  // An answer is an AG-UI resume: a RunAgentInput whose answer is the SSE stream of the run it resumes.
  const resume = (async (entry: { interruptId: string; status: string; payload?: unknown }) => {
    stream?.close();
    const cardsShown = [...approvals.children];
    approvals.replaceChildren(h("p", { class: "muted" }, "Answer sent; the run goes on…"));
    const response = await fetch(`/api/durable/ag-ui/${encodeURIComponent(graph)}`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({
        threadId,
        runId: `console-${crypto.randomUUID()}`,
        state: {},
        messages: [],
        tools: [],
        context: [],
        forwardedProps: {},
        resume: [entry],
      }),
    });
    if (!response.ok) {
      // Refused (an edit the tool's schema rejects, say): the run is still paused, its card stays.
      approvals.replaceChildren(...cardsShown);
      const body = await response.json().catch(() => ({}));
      throw new ApiError(response.status, body);
    }
    if (response.body !== null) await readSse(response.body, dispatch);
  }) as Resume;
  // Cancelling ends the run itself (the durable runner's cancel); the thread's stream then tells it.
  resume.cancel = async (reason: string) => {
    await api(`/api/durable/runs/${encodeURIComponent(threadId)}/cancel`, {
      method: "POST",
      body: { reason },
    });
    approvals.replaceChildren();
    connect();
  };
  connect();
  return {
    close: () => stream?.close(),
  };
}

/** The thread's tool calls as cards, one per call id, kept by the AG-UI tool call events. */
function toolCallCards(cardsRoot: HTMLElement): Record<string, (event: Json) => void> {
  const cards = new Map<string, Card>();
  const card = (toolCallId: string): Card => {
    let entry = cards.get(toolCallId);
    if (entry === undefined) {
      const status = h("span", { class: "badge" });
      const name = h("code");
      const args = h("pre", { class: "data" });
      const result = h("div");
      entry = {
        element: h(
          "article",
          { class: "card tool-card", "data-call": toolCallId },
          h("header", {}, name, " ", status),
          h("h4", {}, "Arguments"),
          args,
          result,
        ),
        status,
        name,
        args,
        result,
      };
      cards.set(toolCallId, entry);
      cardsRoot.append(entry.element);
    }
    return entry;
  };
  const setStatus = (entry: Card, status: string) => {
    entry.status.className = `badge status-${status}`;
    entry.status.textContent = status;
    entry.element.dataset.status = status;
  };

  return {
    TOOL_CALL_START: (event: Json) => {
      const entry = card(event.toolCallId);
      entry.name.textContent = event.toolCallName;
      setStatus(entry, "running");
    },
    TOOL_CALL_ARGS: (event: Json) => {
      showData(card(event.toolCallId).args, JSON.parse(event.delta));
    },
    TOOL_CALL_RESULT: (event: Json) => {
      const entry = card(event.toolCallId);
      const content = JSON.parse(event.content);
      const object = content !== null && typeof content === "object" ? content : {};
      const failed = "error" in object && Object.keys(object).length === 1;
      const declined = object.declined === true;
      const cancelled = object.cancelled === true;
      setStatus(entry, failed ? "error" : declined ? "declined" : cancelled ? "cancelled" : "completed");
      const data = h("pre", { class: "data" });
      showData(data, failed ? content.error : content);
      entry.result.replaceChildren(h("h4", {}, failed ? "Error" : "Result"), data);
    },
    MESSAGES_SNAPSHOT: (event: Json) => {
      // Arguments a person edited before approving: the conversation is restated with them.
      for (const message of event.messages) {
        for (const call of message.toolCalls ?? []) {
          const shown = cards.get(call.id);
          if (shown !== undefined) showData(shown.args, JSON.parse(call.function.arguments));
        }
      }
    },
  };
}
