/** The codes of the ToolErrors the mesh itself reports (besides core's, which tools and the runtime pass on). */
import type { ToolError, ToolErrorCode } from "@tackle/core";

export type MeshErrorCode =
  // the client: nothing answered, or not as expected
  | "no_responders"
  | "unreachable"
  | "unavailable"
  | "disconnected"
  | "node_lost"
  | "not_delivered"
  | "reply_lost"
  | "invalid_reply"
  | "invalid_request"
  | "service_error"
  | "unknown_seat"
  | "ambiguous_seat"
  | "forbidden"
  // a node: the module's calls running and waiting there are at their limits (ADR 0214), retryable
  | "overloaded"
  // stdio children
  | "child_closed"
  | "child_exited"
  | "child_failed";

/** An error a mesh call can come back with: the mesh's own codes or core's. */
export type MeshToolError = ToolError<MeshErrorCode | ToolErrorCode>;
