/**
 * One tool call of an agent framework, the durable way: frames under the tool's policy, an optional
 * approval bound to the call's arguments, the call itself journaled through `ctx.step`.
 */
import { isInterrupt } from "../interrupt/interrupt.ts";
import { redact, type ToolPolicy } from "../policy/tool-policy.ts";
import { type NodeContext, runtimeOf } from "../runner/node-context.ts";
import { approve } from "../tool/approve.ts";
import { tool } from "../tool/tool.ts";
import { nextToolCallId, toolTrace } from "../tool/tool-trace.ts";

/** What the model gets back when a human declines a call. */
export interface DeclinedToolCall {
  readonly declined: true;
  readonly reason?: string;
  /** Nobody answered before the approval expired. */
  readonly expired?: true;
}

export interface IntegratedToolOptions {
  /** The JSON Schema of the tool's input: lets an approver edit the arguments, checked against it. */
  readonly inputSchema?: Record<string, unknown> | PromiseLike<Record<string, unknown>>;
  /** How long an approval may stay open before it is answered as expired. */
  readonly approvalExpiresInMs?: number;
}

export async function runIntegratedTool(
  ctx: NodeContext,
  name: string,
  input: unknown,
  policy: ToolPolicy,
  execute: (input: unknown) => unknown,
  options: IntegratedToolOptions = {},
): Promise<unknown> {
  // Allocated before any await: parallel calls get their ids in the model's order on every pass.
  const id = nextToolCallId(ctx);
  const paths = policy.redact ?? [];
  const hidden = policy.show === false;
  let args = input;
  let shown = paths.length === 0 ? input : redact(input, paths);
  try {
    if (policy.approve === true) {
      // Open without a frame: if the run pauses here, the card shows as awaiting approval.
      if (!hidden) runtimeOf(ctx).openToolCalls.set(id, { id, name, params: shown });
      const answer = await approve(ctx, {
        title: `Run ${name}?`,
        toolCallId: id,
        toolName: name,
        // Bound to the arguments as shown: a fingerprint of the real ones would let anyone who reads the
        // interrupt guess a redacted value by hashing candidates (a PIN in 10,000 tries). The hidden
        // values are the journaled model call's, replayed as they were.
        params: shown,
        display: shown,
        ...(options.inputSchema === undefined ? {} : { inputSchema: await options.inputSchema }),
        ...(options.approvalExpiresInMs === undefined ? {} : { expiresInMs: options.approvalExpiresInMs }),
      });
      if (!answer.approved) {
        if (!hidden) {
          toolTrace(ctx, {
            id,
            name,
            status: "declined",
            params: shown,
            ...(answer.reason === undefined ? {} : { reason: answer.reason }),
          });
        }
        return {
          declined: true,
          ...(answer.reason === undefined ? {} : { reason: answer.reason }),
          ...(answer.expired === true ? { expired: true } : {}),
        } satisfies DeclinedToolCall;
      }
      if (answer.editedArgs !== undefined) {
        // Approved with changes: the call runs with the arguments the human set.
        args = answer.editedArgs;
        shown = paths.length === 0 ? args : redact(args, paths);
      }
    }
    return await tool(ctx, name, shown as Record<string, unknown>, () => settle(execute(args)), {
      id,
      hidden,
      display: shown,
      ...(policy.retry === undefined ? {} : { retry: policy.retry }),
      ...(policy.timeoutMs === undefined ? {} : { timeoutMs: policy.timeoutMs }),
      ...(paths.length === 0 ? {} : { displayResult: (result: unknown) => redact(result, paths) }),
    });
  } catch (error) {
    // A framework would turn a thrown pause into a tool error its model sees. Parked instead: the
    // runner ends the node at the pause and this call never settles.
    if (isInterrupt(error)) return new Promise<never>(() => {});
    throw error;
  }
}

/** A streaming tool's last value is its result. */
async function settle(value: unknown): Promise<unknown> {
  const resolved = await value;
  if (typeof resolved === "object" && resolved !== null && Symbol.asyncIterator in resolved) {
    let last: unknown;
    for await (const item of resolved as AsyncIterable<unknown>) last = item;
    return last;
  }
  return resolved;
}
