/** `approve`: pause for a human's yes or no, bound to one tool call and the exact arguments it will run with. */
import { type NodeContext, runtimeOf } from "../runner/node-context.ts";
import { fingerprint } from "./fingerprint.ts";

export interface ApprovalRequest {
  readonly title: string;
  readonly description?: string;
  /** The tool call this approval is for; by default the approval's own position in the node. */
  readonly toolCallId?: string;
  readonly toolName?: string;
  /** The arguments the tool will run with; a changed set asks again instead of executing. */
  readonly params?: unknown;
  /** What the approver is shown instead of `params` (redacted by a policy). */
  readonly display?: unknown;
}

export interface ApprovalAnswer {
  readonly approved: boolean;
  readonly reason?: string;
}

/**
 * Pauses the run until a human answers this approval. The interrupt id is
 * `<toolCallId>:approve:<fingerprint>`: an answer given for other arguments does not apply.
 */
export async function approve<Answer extends ApprovalAnswer = ApprovalAnswer>(
  ctx: NodeContext,
  request: ApprovalRequest,
): Promise<Answer> {
  const runtime = runtimeOf(ctx);
  const print = fingerprint(request.params ?? null).slice(0, 16);
  const callId = request.toolCallId ?? `${ctx.node}#${ctx.visit}:approval:${runtime.approvalCount++}`;
  const { display, ...rest } = request;
  const shown = {
    kind: "approval",
    ...rest,
    ...(display === undefined ? {} : { params: display }),
    fingerprint: print,
  };
  const answer = await ctx.interrupt<unknown>(shown, { id: `${callId}:approve:${print}` });
  return normalize(answer) as Answer;
}

/** `true`/`false` are accepted as answers too. */
function normalize(answer: unknown): ApprovalAnswer {
  if (typeof answer === "boolean") return { approved: answer };
  if (
    typeof answer === "object" &&
    answer !== null &&
    typeof (answer as ApprovalAnswer).approved === "boolean"
  ) {
    return answer as ApprovalAnswer;
  }
  return { approved: false, reason: "unrecognised answer" };
}
