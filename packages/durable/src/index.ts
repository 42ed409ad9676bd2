/** @tackle/durable: exactly-once tool calls across an agent's interrupt and resume, with frames a UI upserts. */
export { codecVersion, decodeValue, encodeValue } from "./codec/codec.ts";
export { DurableError } from "./errors/durable-error.ts";
export {
  createGraph,
  END,
  type Graph,
  type GraphOptions,
  type NodeFunction,
  type Router,
  START,
  type StateUpdate,
} from "./graph/create-graph.ts";
export { type DeclinedToolCall, runIntegratedTool } from "./integration/run-integrated-tool.ts";
export { Interrupt, type InterruptRequest, isInterrupt } from "./interrupt/interrupt.ts";
export { redact, type ToolPolicies, type ToolPolicy, validatePolicies } from "./policy/tool-policy.ts";
export {
  type Answers,
  type ClientRun,
  createRunner,
  type ExpiryOptions,
  type ForkOptions,
  type Launched,
  type RecoverOptions,
  type ResumeOptions,
  type Runner,
  type RunnerOptions,
  type StartOptions,
} from "./runner/create-runner.ts";
export type { Checkpoint, HistoryOptions } from "./runner/history.ts";
export type { InterruptOptions, NodeContext, StepInfo } from "./runner/node-context.ts";
export type { RunSnapshot } from "./runner/run-snapshot.ts";
export {
  type Backoff,
  defaultNonRetryable,
  nonRetryable,
  type RetryPolicy,
  type StepOptions,
} from "./runner/step-policy.ts";
export type { WatchOptions } from "./runner/watch-frames.ts";
export type {
  CommitBatch,
  DurableStore,
  ExpiringRun,
  ExpiringRunQuery,
  Frame,
  JournalRecord,
  JournalState,
  OpenLimit,
  OpenRunsCount,
  RunPatch,
  RunRecord,
  RunStatus,
  StaleRunQuery,
} from "./store/durable-store.ts";
export { createMemoryStore } from "./stores/memory/memory-store.ts";
export { type ApprovalAnswer, type ApprovalRequest, approve } from "./tool/approve.ts";
export { type ToolOptions, tool } from "./tool/tool.ts";
export { nextToolCallId, type ToolCallStatus, type ToolTrace, toolTrace } from "./tool/tool-trace.ts";
