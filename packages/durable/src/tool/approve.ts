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
  /**
   * The JSON Schema of the tool's input: given, the approver may answer with `editedArgs`, which a
   * resume checks against it (`invalid_edit` otherwise, with nothing stored).
   */
  readonly inputSchema?: Record<string, unknown>;
  /** How long the approval may stay open; past it a resume answers it as expired (declined). */
  readonly expiresInMs?: number;
}

export interface ApprovalAnswer {
  readonly approved: boolean;
  /** Why it was declined; the model sees it. */
  readonly reason?: string;
  /** Arguments the approver changed; the call runs with these instead. */
  readonly editedArgs?: Record<string, unknown>;
  /** The fingerprint of `editedArgs`, recorded by the resume that accepted them. */
  readonly fingerprint?: string;
  /** The approval expired before anyone answered it. */
  readonly expired?: boolean;
  /** The approval was cancelled (by the client, or with its run). */
  readonly cancelled?: boolean;
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
  const { display, expiresInMs, inputSchema, ...rest } = request;
  const shown = {
    kind: "approval",
    ...rest,
    ...(display === undefined ? {} : { params: display }),
    fingerprint: print,
    ...(expiresInMs === undefined ? {} : { expiresAt: new Date(Date.now() + expiresInMs).toISOString() }),
    ...(inputSchema === undefined
      ? {}
      : {
          inputSchema,
          // What an answer may look like, for a client that builds a form (AG-UI's responseSchema).
          responseSchema: {
            type: "object",
            properties: {
              approved: { type: "boolean" },
              reason: { type: "string" },
              editedArgs: inputSchema,
            },
            required: ["approved"],
          },
        }),
  };
  const answer = normalize(await ctx.interrupt<unknown>(shown, { id: `${callId}:approve:${print}` }));
  if (answer.approved && answer.editedArgs !== undefined) {
    // The approval is bound to the edited arguments: they run only under the fingerprint the resume recorded.
    const edited = fingerprint(answer.editedArgs).slice(0, 16);
    if (answer.fingerprint !== edited) {
      return {
        approved: false,
        reason: "the edited arguments do not match the approval's fingerprint",
      } as Answer;
    }
  }
  return answer as Answer;
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
