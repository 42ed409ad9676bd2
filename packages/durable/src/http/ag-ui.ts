/**
 * Frames as AG-UI events (protocol 1.0). A thread's frames are one log; each stretch of it between a
 * start (or resume) and a pause (or the end) is one AG-UI run with its own `runId`. The translation is
 * stateful over the whole log, so a tool call announced in one AG-UI run is never announced again in
 * the next (AG-UI's reducer appends arguments), and a step left open by a pause is finished before the
 * run's `RUN_FINISHED`.
 */
import { setOwn } from "@tackle/core/internal";
import type { Frame } from "../store/durable-store.ts";

export type AgUiEvent = { readonly type: string } & Record<string, unknown>;

export interface AgUiRunIds {
  readonly threadId: string;
  readonly runId: string;
}

/** An AG-UI message as the translator keeps it (only the fields it writes or restates). */
type Message = Record<string, unknown> & { id: string; role: string };

interface ToolCallEntry {
  readonly id: string;
  readonly type: "function";
  readonly function: { name: string; arguments: string };
}

/** The AG-UI run id of a segment: the client's own when it gave one, else derived from the frame. */
export function agUiRunIdOf(frame: Frame, runId: string): string {
  const data = (frame.data ?? {}) as { clientRunId?: unknown };
  return typeof data.clientRunId === "string" ? data.clientRunId : `${runId}.${frame.seq}`;
}

/** The SSE id of the `index`-th event of frame `seq`: `<seq>.<index>`, so a reconnect resumes mid-frame. */
export function agUiEventId(seq: number, index: number): string {
  return `${seq}.${index}`;
}

/** Parses an SSE id back to where to resume: after frame `seq`'s event `index`. */
export function parseAgUiEventId(text: string): { seq: number; index: number } | undefined {
  const match = /^(\d{1,15})(?:\.(\d{1,6}))?$/.exec(text);
  if (match === null) return undefined;
  const seq = Number(match[1]);
  // A bare seq (the frames API's id) means the whole frame was delivered.
  return { seq, index: match[2] === undefined ? Number.MAX_SAFE_INTEGER : Number(match[2]) };
}

/** Turns a thread's frames, fed in seq order from its first, into AG-UI events. */
export class AgUiTranslator {
  private readonly threadId: string;
  private runId: string;
  private agUiRunId: string | undefined;
  private runOpen = false;
  private nextRunName: string | undefined;
  /** The run's state as the frames told it (a start's input, then each node's delta). */
  private state: Record<string, unknown> | undefined;
  private readonly openTexts = new Set<string>();
  private readonly steps = new Set<string>();
  /** Tool calls whose start/args/end went out, with the arguments they carried. */
  private readonly announced = new Map<string, string>();
  private readonly answered = new Set<string>();
  /** The conversation as the client holds it: its own messages plus what this stream added. */
  private messages: Message[] = [];
  /** What the frames showed of each tool call, which the client's messages are restated with. */
  private readonly shown = new ShownToolCalls();

  constructor(ids: AgUiRunIds) {
    this.threadId = ids.threadId;
    this.runId = ids.runId;
  }

  /** The AG-UI run id of the segment in progress (after its start frame was fed). */
  get currentRunId(): string | undefined {
    return this.agUiRunId;
  }

  /** True between a segment's RUN_STARTED and its RUN_FINISHED / RUN_ERROR. */
  get isRunOpen(): boolean {
    return this.runOpen;
  }

  /**
   * Names the next AG-UI run that no frame names: one the translator opens itself for something that
   * happened outside a client's run (a cancel of a paused run), answered to the client that asked.
   */
  nameNextRun(runId: string): void {
    this.nextRunName = runId;
  }

  translate(frame: Frame): AgUiEvent[] {
    const starts =
      frame.type === "run_started" || frame.type === "run_resumed" || frame.type === "run_recovered";
    if (!this.runOpen && !starts) {
      // Something happened to the thread outside a run the client started (a cancel of a paused run):
      // it is told inside an AG-UI run of its own.
      const data = this.nextRunName === undefined ? {} : { clientRunId: this.nextRunName };
      return [...this.translate({ ...frame, type: "run_resumed", data }), ...this.translate(frame)];
    }
    if (starts) this.nextRunName = undefined;
    const events = this.translateInRun(frame);
    this.shown.see(frame);
    return events;
  }

  private translateInRun(frame: Frame): AgUiEvent[] {
    const data = (frame.data ?? {}) as Record<string, unknown>;
    switch (frame.type) {
      case "run_started":
      case "run_resumed": {
        if (typeof data.runId === "string") this.runId = data.runId;
        // A run that ended in a pause was finished; an open one here means a run_recovered-less
        // takeover never happened; either way a new AG-UI run starts.
        const closing = this.runOpen ? this.finish({ type: "RUN_ERROR", message: "superseded" }) : [];
        this.agUiRunId = agUiRunIdOf(frame, this.runId);
        this.runOpen = true;
        // Restated here too: a row kept before ADR 0128 may hold a tool call's real values.
        if (Array.isArray(data.clientMessages))
          this.messages = this.shown.restate(data.clientMessages) as Message[];
        if (isObject(data.state)) this.state = structuredClone(data.state);
        const started: AgUiEvent = { type: "RUN_STARTED", threadId: this.threadId, runId: this.agUiRunId };
        // The run's state as it starts (a start's input, or where a paused run stands): the client's state.
        const snapshot: AgUiEvent[] =
          this.state === undefined ? [] : [{ type: "STATE_SNAPSHOT", snapshot: structuredClone(this.state) }];
        return [...closing, started, ...snapshot];
      }
      case "run_recovered":
        // Another process took the run over: the same AG-UI run goes on.
        return this.runOpen ? [] : this.translateInRun({ ...frame, type: "run_resumed" });
      case "node_started": {
        const stepName = String(data.node);
        // A crash re-runs the node: its step is already open.
        if (this.steps.has(stepName)) return [];
        this.steps.add(stepName);
        return [{ type: "STEP_STARTED", stepName }];
      }
      case "node_completed": {
        const stepName = String(data.node);
        const events = this.stateDelta(data.stateDelta);
        if (this.steps.delete(stepName)) events.push({ type: "STEP_FINISHED", stepName });
        return events;
      }
      case "text_start":
      case "text_delta":
      case "text_end":
        return this.text(frame.type, data);
      case "tool_call":
        return this.toolCall(data);
      case "interrupt": {
        const interrupts = ((data.interrupts ?? []) as { id: string; request: unknown }[]).map(
          toAgUiInterrupt,
        );
        return this.finish({
          type: "RUN_FINISHED",
          threadId: this.threadId,
          runId: this.agUiRunId ?? this.runId,
          outcome: { type: "interrupt", interrupts },
        });
      }
      case "run_completed":
        return this.finish({
          type: "RUN_FINISHED",
          threadId: this.threadId,
          runId: this.agUiRunId ?? this.runId,
          result: data.state ?? null,
          outcome: { type: "success" },
        });
      case "run_cancelled":
        return this.finish({
          type: "RUN_FINISHED",
          threadId: this.threadId,
          runId: this.agUiRunId ?? this.runId,
          outcome: { type: "cancelled" },
        });
      case "run_failed": {
        const error = (data.error ?? {}) as { message?: unknown; code?: unknown };
        return this.finish({
          type: "RUN_ERROR",
          message: String(error.message ?? "run failed"),
          ...(typeof error.code === "string" ? { code: error.code } : {}),
        });
      }
      default:
        return [{ type: "CUSTOM", name: frame.type, value: frame.data ?? null }];
    }
  }

  /** A node's state update, applied to the state kept here and sent as `STATE_DELTA`. */
  private stateDelta(delta: unknown): AgUiEvent[] {
    if (!Array.isArray(delta) || delta.length === 0 || this.state === undefined) return [];
    for (const operation of delta as { op: string; path: string; value?: unknown }[]) {
      const key = operation.path.slice(1).replaceAll("~1", "/").replaceAll("~0", "~");
      if (operation.op === "remove") delete this.state[key];
      else setOwn(this.state, key, structuredClone(operation.value));
    }
    return [{ type: "STATE_DELTA", delta }];
  }

  /** A model's streamed text (a journaled model stream's frames) as AG-UI text messages. */
  private text(type: string, data: Record<string, unknown>): AgUiEvent[] {
    const messageId = String(data.messageId);
    if (type === "text_start") {
      if (this.openTexts.has(messageId)) return [];
      this.openTexts.add(messageId);
      this.messages.push({ id: messageId, role: "assistant", content: "" });
      return [{ type: "TEXT_MESSAGE_START", messageId, role: "assistant" }];
    }
    if (!this.openTexts.has(messageId)) return [];
    if (type === "text_end") {
      this.openTexts.delete(messageId);
      return [{ type: "TEXT_MESSAGE_END", messageId }];
    }
    const delta = typeof data.delta === "string" ? data.delta : "";
    if (delta === "") return [];
    const message = this.messages.find((entry) => entry.id === messageId);
    if (message !== undefined) message.content = `${String(message.content ?? "")}${delta}`;
    return [{ type: "TEXT_MESSAGE_CONTENT", messageId, delta }];
  }

  /** Closes the open text messages and steps, then ends the AG-UI run with `last`. */
  private finish(last: AgUiEvent): AgUiEvent[] {
    const events: AgUiEvent[] = [...this.openTexts].map((messageId) => ({
      type: "TEXT_MESSAGE_END",
      messageId,
    }));
    this.openTexts.clear();
    events.push(...[...this.steps].map((stepName) => ({ type: "STEP_FINISHED", stepName })));
    this.steps.clear();
    this.runOpen = false;
    events.push(last);
    return events;
  }

  private toolCall(data: Record<string, unknown>): AgUiEvent[] {
    const toolCallId = String(data.id);
    const name = String(data.name);
    const args = JSON.stringify(data.params ?? {});
    const events: AgUiEvent[] = [];
    const before = this.announced.get(toolCallId);
    if (before === undefined) {
      events.push(
        { type: "TOOL_CALL_START", toolCallId, toolCallName: name },
        { type: "TOOL_CALL_ARGS", toolCallId, delta: args },
        { type: "TOOL_CALL_END", toolCallId },
      );
      this.announced.set(toolCallId, args);
      this.messages.push({
        id: toolCallId,
        role: "assistant",
        toolCalls: [{ id: toolCallId, type: "function", function: { name, arguments: args } }],
      });
    } else if (before !== args && data.params !== undefined) {
      // The arguments changed (a human edited them before approving): AG-UI appends argument
      // deltas, so the conversation is restated with the call's new arguments instead.
      this.announced.set(toolCallId, args);
      this.editArguments(toolCallId, name, args);
      events.push({ type: "MESSAGES_SNAPSHOT", messages: structuredClone(this.messages) });
    }
    if (this.answered.has(toolCallId)) return events;
    const content = resultContent(data);
    if (content !== undefined) {
      const messageId = `${toolCallId}:result`;
      this.answered.add(toolCallId);
      events.push({ type: "TOOL_CALL_RESULT", messageId, toolCallId, content, role: "tool" });
      this.messages.push({ id: messageId, role: "tool", toolCallId, content });
    }
    return events;
  }

  private editArguments(toolCallId: string, name: string, args: string): void {
    for (const message of this.messages) {
      const calls = message.toolCalls as ToolCallEntry[] | undefined;
      const call = calls?.find((entry) => entry.id === toolCallId);
      if (call !== undefined) {
        call.function.arguments = args;
        return;
      }
    }
    this.messages.push({
      id: toolCallId,
      role: "assistant",
      toolCalls: [{ id: toolCallId, type: "function", function: { name, arguments: args } }],
    });
  }
}

/** A tool_call frame's status that carries the call's outcome (what `resultContent` writes out). */
function isOutcome(status: unknown): boolean {
  return status === "completed" || status === "error" || status === "declined" || status === "cancelled";
}

/** A `tool_call` frame's outcome as a tool message's content; undefined while the call has none. */
function resultContent(data: Record<string, unknown>): string | undefined {
  const outcome: Record<string, unknown> | undefined =
    data.status === "error"
      ? { error: data.error ?? "failed" }
      : data.status === "declined"
        ? { declined: true, ...(data.reason === undefined ? {} : { reason: data.reason }) }
        : data.status === "cancelled"
          ? { cancelled: true, ...(data.reason === undefined ? {} : { reason: data.reason }) }
          : undefined;
  return data.status === "completed"
    ? JSON.stringify(data.result ?? null)
    : outcome && JSON.stringify(outcome);
}

/**
 * What a thread's frames showed of each tool call: its name, its arguments as last shown (an approval's
 * when no card shows the call) and its first outcome, all under the tool's redaction policy (ADR 0128).
 */
class ShownToolCalls {
  // The frames' own values, kept as they are: they are written out as JSON only when a client's
  // messages are restated, which most streams never do (R2: no stringify per tool_call frame).
  private readonly calls = new Map<string, { name: string; params: unknown }>();
  private readonly results = new Map<string, Record<string, unknown>>();

  /** Takes in one frame, fed in seq order. */
  see(frame: Frame): void {
    const data = (frame.data ?? {}) as Record<string, unknown>;
    if (frame.type === "tool_call") {
      const id = String(data.id);
      if (!this.calls.has(id) || data.params !== undefined)
        this.calls.set(id, { name: String(data.name), params: data.params });
      if (!this.results.has(id) && isOutcome(data.status)) this.results.set(id, data);
      return;
    }
    if (frame.type !== "interrupt" || !Array.isArray(data.interrupts)) return;
    for (const entry of data.interrupts as { request?: unknown }[]) {
      const request = (isObject(entry) && isObject(entry.request) ? entry.request : {}) as Record<
        string,
        unknown
      >;
      const id = request.toolCallId;
      if (typeof id !== "string" || this.calls.has(id)) continue;
      const name = typeof request.toolName === "string" ? request.toolName : "";
      this.calls.set(id, { name, params: request.params });
    }
  }

  /**
   * A client's messages with every tool call the thread showed as it showed it: the call's arguments,
   * its result (a result the thread has not shown is dropped: the stream adds it when it lands). Tool
   * calls the thread never showed are the client's own, and kept; so is everything else.
   */
  restate(messages: readonly unknown[]): unknown[] {
    const out: unknown[] = [];
    for (const message of messages) {
      if (!isObject(message)) {
        out.push(message);
        continue;
      }
      const callId = message.toolCallId;
      if (message.role === "tool" && typeof callId === "string" && this.calls.has(callId)) {
        const shownResult = this.results.get(callId);
        const content = shownResult === undefined ? undefined : resultContent(shownResult);
        if (content !== undefined) out.push({ id: message.id, role: "tool", toolCallId: callId, content });
        continue;
      }
      if (!Array.isArray(message.toolCalls)) {
        out.push(structuredClone(message));
        continue;
      }
      const toolCalls = message.toolCalls.map((call: unknown) => {
        const shown = isObject(call) && typeof call.id === "string" ? this.calls.get(call.id) : undefined;
        if (shown === undefined) return structuredClone(call);
        const given = (call as { function?: { name?: unknown } }).function?.name;
        const name = shown.name === "" && typeof given === "string" ? given : shown.name;
        return {
          id: (call as { id: string }).id,
          type: "function",
          function: { name, arguments: JSON.stringify(shown.params ?? {}) },
        };
      });
      out.push({ ...structuredClone(message), toolCalls });
    }
    return out;
  }
}

/** A client's messages restated with what `frames` (a thread's, in seq order) showed of each tool call. */
export function restateClientMessages(frames: readonly Frame[], messages: readonly unknown[]): unknown[] {
  const shown = new ShownToolCalls();
  for (const frame of frames) shown.see(frame);
  return shown.restate(messages);
}

/** The AG-UI events for one frame, without the thread's history (kept for callers of the frames API). */
export function toAgUiEvents(frame: Frame, ids: AgUiRunIds): AgUiEvent[] {
  return new AgUiTranslator(ids).translate(frame);
}

function toAgUiInterrupt(entry: { id: string; request: unknown }): Record<string, unknown> {
  const request = (
    typeof entry.request === "object" && entry.request !== null ? entry.request : {}
  ) as Record<string, unknown>;
  const approval = request.kind === "approval";
  return {
    id: entry.id,
    reason: approval ? "tool_approval" : "input",
    ...(typeof request.title === "string" ? { message: request.title } : {}),
    ...(typeof request.toolCallId === "string" ? { toolCallId: request.toolCallId } : {}),
    ...(typeof request.expiresAt === "string" ? { expiresAt: request.expiresAt } : {}),
    ...(isObject(request.responseSchema) ? { responseSchema: request.responseSchema } : {}),
    // Everything the package knows rides in metadata, which AG-UI keeps open by key.
    metadata: { request: entry.request },
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
