/** Frames as AG-UI events (protocol 1.0), so an AG-UI client can follow a durable run. */
import type { Frame } from "../store/durable-store.ts";

export type AgUiEvent = { readonly type: string } & Record<string, unknown>;

export interface AgUiRunIds {
  readonly threadId: string;
  readonly runId: string;
}

/** The AG-UI events for one frame (a tool call's `running` opens the call: start, args, end). */
export function toAgUiEvents(frame: Frame, ids: AgUiRunIds): AgUiEvent[] {
  const data = (frame.data ?? {}) as Record<string, unknown>;
  switch (frame.type) {
    case "run_started":
    case "run_resumed":
    case "run_recovered":
      // A pause ended the AG-UI run (RUN_FINISHED with an interrupt outcome); the resume starts the next.
      return [{ type: "RUN_STARTED", threadId: ids.threadId, runId: ids.runId }];
    case "node_started":
      return [{ type: "STEP_STARTED", stepName: String(data.node) }];
    case "node_completed":
      return [{ type: "STEP_FINISHED", stepName: String(data.node) }];
    case "tool_call":
      return toolCallEvents(data);
    case "interrupt":
      return [
        {
          type: "RUN_FINISHED",
          threadId: ids.threadId,
          runId: ids.runId,
          outcome: {
            type: "interrupt",
            interrupts: ((data.interrupts ?? []) as { id: string; request: unknown }[]).map(toAgUiInterrupt),
          },
        },
      ];
    case "run_completed":
      return [
        {
          type: "RUN_FINISHED",
          threadId: ids.threadId,
          runId: ids.runId,
          result: data.state,
          outcome: { type: "success" },
        },
      ];
    case "run_failed": {
      const error = (data.error ?? {}) as { message?: unknown; code?: unknown };
      return [
        {
          type: "RUN_ERROR",
          message: String(error.message ?? "run failed"),
          ...(typeof error.code === "string" ? { code: error.code } : {}),
        },
      ];
    }
    default:
      return [{ type: "CUSTOM", name: frame.type, value: frame.data }];
  }
}

function toolCallEvents(data: Record<string, unknown>): AgUiEvent[] {
  const toolCallId = String(data.id);
  switch (data.status) {
    case "running":
      return [
        { type: "TOOL_CALL_START", toolCallId, toolCallName: String(data.name) },
        { type: "TOOL_CALL_ARGS", toolCallId, delta: JSON.stringify(data.params ?? {}) },
        { type: "TOOL_CALL_END", toolCallId },
      ];
    case "completed":
      return [
        {
          type: "TOOL_CALL_RESULT",
          messageId: `${toolCallId}:result`,
          toolCallId,
          content: JSON.stringify(data.result ?? null),
        },
      ];
    case "error":
      return [
        {
          type: "TOOL_CALL_RESULT",
          messageId: `${toolCallId}:result`,
          toolCallId,
          content: JSON.stringify({ error: data.error }),
        },
      ];
    default:
      // awaiting_approval, declined: AG-UI has no such states; a custom event keeps the card's status.
      return [{ type: "CUSTOM", name: "tool_call", value: data }];
  }
}

function toAgUiInterrupt(entry: { id: string; request: unknown }): AgUiEvent {
  const request = (
    typeof entry.request === "object" && entry.request !== null ? entry.request : {}
  ) as Record<string, unknown>;
  const approval = request.kind === "approval";
  return {
    type: "interrupt",
    id: entry.id,
    reason: approval ? "approval" : "input",
    ...(typeof request.title === "string" ? { message: request.title } : {}),
    ...(typeof request.toolCallId === "string" ? { toolCallId: request.toolCallId } : {}),
    metadata: { request: entry.request },
  };
}
