/**
 * Tool calls that need a person's approval, reached through MCP (ADR 0265). Each such call is a durable
 * run (`@tackle/durable`): it pauses at an approval bound to the call's arguments, and the tool runs
 * exactly once, when the approval is answered yes. A client that declared elicitation is asked there and
 * then (`elicitation/create`, the call's editable arguments as the form); any other client — or one
 * that did not answer before the approval expired, or went away — gets the paused call back, and
 * `tackle.approve` answers it later, from any client of any server on the same runs store.
 */
import { randomUUID } from "node:crypto";
import type { Tool as McpTool } from "@modelcontextprotocol/server";
import { type ToolCallResult, type ToolClient, ToolError } from "@tackle/core";
import {
  createGraph,
  createRunner,
  DurableError,
  type DurableStore,
  type Runner,
  type RunSnapshot,
  runIntegratedTool,
} from "@tackle/durable";
import { splitToolName } from "../tool-source/split-tool-name.ts";
import type { SourceCallOptions, ToolSource } from "../tool-source/tool-source.ts";
import { approvalForm, type FormAnswer } from "./approval-form.ts";

export const approveToolName = "tackle.approve";
export const approvalsToolName = "tackle.approvals";
const graphName = "mcp-approved-call";
const threadPrefix = "mcp-approval-";
/** How long an approval waits for its answer when the server names no other time. */
export const defaultApprovalExpiresInMs = 10 * 60_000;
/** How many calls may wait for approval at once, by default; past it a new one is refused. */
export const defaultMaxOpenApprovals = 1_000;
/** How long an answered approval's run is kept (a second answer reads its outcome), by default. */
export const defaultKeepAnsweredMs = 24 * 60 * 60_000;
/** How many open approvals tackle.approvals lists at once. */
const listedApprovals = 100;

export interface ApprovalCallsOptions {
  /** Tools that need approval: `module.tool`, `module.*`, or `*`. */
  readonly tools: readonly string[];
  /** Where the paused calls live: a SQLite path or a durable store. Shared, any server may answer. */
  readonly store: string | DurableStore;
  /**
   * How long the calling client's form stays open. Default 10 minutes. Unanswered by then, the call
   * stays paused (it is never declined for want of an answer) and `tackle.approve` answers it.
   */
  readonly expiresInMs?: number;
  /**
   * How many calls may wait for approval, or run after it, at once (default 1,000), across every
   * server on the store. Past it a new call is refused (`too_many_approvals`) rather than paused, so
   * unanswered calls cannot grow the store without end.
   */
  readonly maxOpen?: number;
  /**
   * How long an answered (completed, failed or cancelled) approval's run is kept before it is deleted
   * (default 24 hours). Open ones are never deleted: an unanswered call stays paused.
   */
  readonly keepAnsweredMs?: number;
}

export interface ApprovalCalls {
  /** Whether a call of `name` waits for approval. */
  needs(name: string): boolean;
  /** `tackle.approve` and `tackle.approvals`, for `tools/list`. */
  readonly tools: readonly McpTool[];
  /** Whether `name` is one of `tools`. */
  owns(name: string): boolean;
  /** Runs a call that needs approval (asking `client` when it can elicit), or one of `tools`. */
  call(name: string, args: Record<string, unknown>, options: SourceCallOptions): Promise<ToolCallResult>;
  close(): Promise<void>;
}

interface CallState {
  readonly tool: string;
  readonly args: Record<string, unknown>;
  readonly inputSchema?: Record<string, unknown>;
  /** Until when the caller's client is asked (ISO time); past it the call waits for tackle.approve. */
  readonly askUntil: string;
  readonly result?: { readonly ok: boolean; readonly output?: unknown; readonly error?: unknown };
  readonly [key: string]: unknown;
}

export function createApprovalCalls(source: ToolSource, options: ApprovalCallsOptions): ApprovalCalls {
  const patterns = options.tools;
  const expiresInMs = options.expiresInMs ?? defaultApprovalExpiresInMs;
  const graph = approvalGraph(source);
  const runner: Runner = createRunner({ store: options.store, graphs: [graph] });
  const maxOpen = options.maxOpen ?? defaultMaxOpenApprovals;
  const keepAnsweredMs = options.keepAnsweredMs ?? defaultKeepAnsweredMs;
  let prunedAt = Number.NEGATIVE_INFINITY;

  /** Deletes answered approvals past their keeping time, at most once a minute (or as often as they expire). */
  async function pruneAnswered(): Promise<void> {
    const now = Date.now();
    if (now - prunedAt < Math.min(60_000, keepAnsweredMs)) return;
    prunedAt = now;
    await runner.prune({ prefix: threadPrefix, olderThanMs: keepAnsweredMs });
  }

  async function start(
    name: string,
    args: Record<string, unknown>,
    client: ToolClient | undefined,
    signal?: AbortSignal,
  ) {
    const started = Date.now();
    await pruneAnswered();
    const inputSchema = await inputSchemaOf(source, name);
    const threadId = `${threadPrefix}${randomUUID()}`;
    let snapshot: RunSnapshot<CallState>;
    try {
      // Counted by the store in the start's own transaction, so calls at once, from this server or
      // another on the same store, cannot pass the bound together (ADR 0276).
      snapshot = await runner.start(
        graph,
        {
          tool: name,
          args,
          askUntil: new Date(started + expiresInMs).toISOString(),
          ...(inputSchema === undefined ? {} : { inputSchema }),
        },
        { threadId, openLimit: { prefix: threadPrefix, max: maxOpen } },
      );
    } catch (error) {
      if (!(DurableError.isInstance(error) && error.code === "too_many_open_runs")) throw error;
      return failure(
        "too_many_approvals",
        `${maxOpen} calls already wait for approval or run after it: answer some with ${approveToolName} (${approvalsToolName} lists them) before making more`,
        { open: maxOpen },
      );
    }
    const open = snapshot.interrupts[0];
    if (snapshot.status !== "paused" || open === undefined) return outcome(snapshot);
    if (client?.elicit === undefined) return paused(snapshot);
    const form = approvalForm(name, args, inputSchema);
    const left = expiresInMs - (Date.now() - started);
    let reply: FormAnswer;
    try {
      reply = form.answer(
        await client.elicit(
          { message: form.message, requestedSchema: form.requestedSchema },
          { timeoutMs: Math.max(1, left), ...(signal === undefined ? {} : { signal }) },
        ),
      );
    } catch (error) {
      // No answer in time, or the client went away: the call stays paused for tackle.approve.
      const now = await runner.get<CallState>(threadId);
      return now?.status === "paused" ? paused(now, (error as Error).message) : outcome(now ?? snapshot);
    }
    return answer(runner, threadId, reply, signal);
  }

  async function list(): Promise<ToolCallResult> {
    await pruneAnswered();
    const { open, count } = await openApprovals(runner, listedApprovals);
    return {
      ok: true,
      output: {
        approvals: open.map(describe),
        ...(count > open.length ? { more: count - open.length } : {}),
      },
    };
  }

  return {
    needs: (name) =>
      patterns.some(
        (pattern) =>
          pattern === "*" ||
          pattern === name ||
          (pattern.endsWith(".*") && name.startsWith(pattern.slice(0, -1))),
      ),
    tools: approvalTools,
    owns: (name) => name === approveToolName || name === approvalsToolName,
    async call(name, args, callOptions) {
      if (name === approvalsToolName) return list();
      if (name === approveToolName) {
        const { approval, approved, reason, arguments: edited } = args;
        if (typeof approval !== "string" || typeof approved !== "boolean") {
          return failure(
            "invalid_input",
            `${approveToolName} takes { approval: string, approved: boolean, reason?, arguments? }`,
          );
        }
        return answer(
          runner,
          approval,
          {
            approved,
            ...(typeof reason === "string" ? { reason } : {}),
            ...(approved && isRecord(edited) ? { editedArgs: edited } : {}),
          },
          callOptions.signal,
        );
      }
      return start(name, args, callOptions.client, callOptions.signal);
    },
    close: () => runner.close(),
  };
}

/** The one-node graph of a call that waits for approval, then runs the tool through `source`. */
function approvalGraph(source: ToolSource) {
  return createGraph<CallState>(graphName).node("call", async (state, ctx) => {
    const result = await runIntegratedTool(
      ctx,
      state.tool,
      state.args,
      { approve: true },
      async (input) => {
        const called = await source.call(state.tool, input, {});
        return called.ok
          ? { ok: true, output: called.output ?? null }
          : { ok: false, error: called.error.toJSON() };
      },
      // No durable expiry: a call nobody answered in time stays paused (the runner would decline it).
      state.inputSchema === undefined ? {} : { inputSchema: state.inputSchema },
    );
    // Declined: the durable integration's `{ declined, reason }` is what the caller reads.
    const declined = (result as { declined?: unknown }).declined === true;
    return { result: declined ? { ok: true, output: result } : (result as NonNullable<CallState["result"]>) };
  });
}

/** The open approvals, in thread order: every page of the store read, at most `limit` kept. */
async function openApprovals(
  runner: Runner,
  limit: number,
): Promise<{ open: RunSnapshot<CallState>[]; count: number }> {
  const open: RunSnapshot<CallState>[] = [];
  let count = 0;
  let after: string | undefined;
  for (;;) {
    const threads = await runner.threads({
      prefix: threadPrefix,
      limit: 500,
      ...(after === undefined ? {} : { after }),
    });
    for (const thread of threads) {
      if (thread.status !== "paused") continue;
      count += 1;
      if (open.length >= limit) continue;
      const run = await runner.get<CallState>(thread.threadId);
      if (run !== undefined && run.interrupts.length > 0) open.push(run);
    }
    if (threads.length < 500) return { open, count };
    after = threads.at(-1)?.threadId;
  }
}

async function inputSchemaOf(source: ToolSource, name: string): Promise<Record<string, unknown> | undefined> {
  const parts = splitToolName(name);
  const info = (await source.catalogue()).find((module) => module.module === parts?.module);
  return info?.tools.find((tool) => tool.name === parts?.tool)?.inputSchema;
}

/**
 * Resumes the call with `reply`; an answer that came second gets the first one's outcome, once that
 * has one: while the first answer's call still runs, the second waits for it (up to
 * `lateAnswerWaitMs`, or its own call's end) rather than being told an unfinished run as an outcome.
 */
async function answer(
  runner: Runner,
  threadId: string,
  reply: FormAnswer,
  signal?: AbortSignal,
): Promise<ToolCallResult> {
  const run = await runner.get<CallState>(threadId);
  if (run === undefined || run.graph !== graphName) {
    return failure("not_found", `No approval "${threadId}": ${approvalsToolName} lists the open ones`, {
      resource: "approval",
      id: threadId,
    });
  }
  const open = run.interrupts[0];
  if (run.status !== "paused" || open === undefined) return settled(runner, run, true, signal);
  try {
    // The same answer given twice is a replay: the run may be running on in another process then.
    return settled(runner, await runner.resume<CallState>(threadId, { [open.id]: reply }), false, signal);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === "answer_conflict" || code === "run_not_paused" || code === "unknown_interrupt") {
      const now = await runner.get<CallState>(threadId);
      if (now !== undefined && now.status !== "paused") return settled(runner, now, true, signal);
    }
    // An edit the tool's schema refuses (invalid_edit): still open.
    return failure(typeof code === "string" ? code : "approval_failed", (error as Error).message);
  }
}

/** How long an answer waits for a call another answer set running (in any process) to end. */
export const lateAnswerWaitMs = 30_000;

/**
 * What an answer is told of the run it found or resumed: its outcome (`late`: another answer's),
 * waited for while the call runs (the frames end when the run stops running). Still running past the
 * wait, it says so: answered, running, nothing to do — never an error, which a caller would read as
 * its answer having failed.
 */
async function settled(
  runner: Runner,
  run: RunSnapshot<CallState>,
  late: boolean,
  signal: AbortSignal | undefined,
): Promise<ToolCallResult> {
  if (run.status !== "running") return outcome(run, late);
  const waited = AbortSignal.timeout(lateAnswerWaitMs);
  try {
    for await (const _ of runner.watch(run.threadId, {
      signal: signal === undefined ? waited : AbortSignal.any([signal, waited]),
    })) {
      // Each frame is the running call's progress; the watch ends when the run does.
    }
  } catch {
    // The run was deleted meanwhile (pruned): what the store holds now, read below, decides.
  }
  const now = (await runner.get<CallState>(run.threadId)) ?? run;
  if (now.status !== "running") return outcome(now, late);
  return {
    ok: true,
    output: {
      alreadyAnswered: true,
      status: "running",
      approval: now.threadId,
      next: `Another answer approved this call and it is running; ${approvalsToolName} no longer lists it.`,
    },
  };
}

/** What a finished call answers: the tool's own result, or that it was declined. */
function outcome(run: RunSnapshot<CallState>, late = false): ToolCallResult {
  const result = run.state.result;
  if (run.status !== "completed" || result === undefined) {
    return failure(
      run.status === "failed" ? "approval_failed" : `approval_${run.status}`,
      `The approved call ended ${run.status}${run.error === undefined ? "" : `: ${run.error.message}`}`,
    );
  }
  if (result.ok) {
    const output = result.output as { declined?: unknown } | null;
    if (late) return { ok: true, output: { alreadyAnswered: true, result: output } };
    return { ok: true, output };
  }
  const error = result.error as { code?: string; message?: string; data?: unknown };
  return failure(error.code ?? "tool_failed", error.message ?? "The tool failed", error.data);
}

function paused(run: RunSnapshot<CallState>, why?: string): ToolCallResult {
  return {
    ok: true,
    output: {
      status: "awaiting_approval",
      ...describe(run),
      ...(why === undefined ? {} : { notAsked: why }),
      next: `Nothing ran yet. A person answers with ${approveToolName} { approval: "${run.threadId}", approved: true | false, reason?, arguments? } (arguments replace the call's, checked against its schema); ${approvalsToolName} lists every open approval.`,
    },
  };
}

function describe(run: RunSnapshot<CallState>) {
  return {
    approval: run.threadId,
    tool: run.state.tool,
    arguments: run.state.args,
    askedUntil: run.state.askUntil,
    ...(run.state.inputSchema === undefined ? {} : { inputSchema: run.state.inputSchema }),
  };
}

function failure(code: string, message: string, data?: unknown): ToolCallResult {
  return { ok: false, error: new ToolError(code, message, data === undefined ? {} : { data }) };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const approvalTools: McpTool[] = [
  {
    name: approveToolName,
    description:
      "Answers a tool call that waits for a person's approval (its answer said awaiting_approval): approved true runs it once, with `arguments` instead of its own when given; false declines it with the reason. Answers with the call's result.",
    inputSchema: {
      type: "object",
      properties: {
        approval: { type: "string", description: "The approval's id, as the paused call answered it" },
        approved: { type: "boolean" },
        reason: { type: "string", description: "Why; the caller is told" },
        arguments: {
          type: "object",
          description: "Changed arguments (approved only), checked against the tool's schema",
        },
      },
      required: ["approval", "approved"],
      additionalProperties: false,
    },
  },
  {
    name: approvalsToolName,
    description:
      "Lists tool calls waiting for a person's approval: each with its tool, its arguments and until when its caller was asked.",
    inputSchema: { type: "object", properties: {}, additionalProperties: false },
    annotations: { readOnlyHint: true },
  },
];
