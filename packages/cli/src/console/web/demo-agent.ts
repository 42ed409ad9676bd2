/**
 * The console's demo durable agent: a scripted model (no hosted LLM) that looks an order up, then asks
 * a person to approve a refund before it runs it. The card number is redacted in every frame and in
 * the approval; the tool receives the real value.
 *
 * The refund tool refuses an amount above the order's (an approver who edits the amount past it sees
 * the refund's card fail with that error, and the run ends with the outcome `refund_failed`).
 *
 * Answers to the approval (the durable AG-UI endpoint's shapes): `{ approved: true }`;
 * `{ approved: true, editedArgs }` (the person edited the arguments: the refund runs with those);
 * `{ approved: false, reason }`; `{ approved: false, cancelled: true }` (a resume entry `cancelled`).
 */
import { approve, createGraph, type Graph, redact, tool, toolTrace } from "@tackle/durable";

export const demoGraphName = "demo-refund";

export interface DemoState {
  readonly orderId: string;
  readonly outcome?: "refunded" | "declined" | "cancelled" | "refund_failed";
  readonly reason?: string;
  readonly refund?: unknown;
  readonly [key: string]: unknown;
}

type RefundParams = {
  readonly orderId: string;
  readonly amount: number;
  readonly cardNumber: string;
  readonly note: string;
};

interface DemoAnswer {
  readonly approved: boolean;
  readonly reason?: string;
  readonly cancelled?: boolean;
  readonly editedArgs?: Partial<RefundParams>;
}

const redacted = ["cardNumber", "card.number"];

/** What an approver may send as `editedArgs`: never the card number, which they only see redacted. */
const editableSchema = {
  type: "object",
  properties: {
    orderId: { type: "string" },
    amount: { type: "number", exclusiveMinimum: 0 },
    note: { type: "string", maxLength: 200 },
  },
  required: ["amount"],
  additionalProperties: false,
};

const refundCallId = "agent:refund";

/** The scripted model's turns: each is what a model would have asked for, in order. */
function scriptedModel(orderId: string) {
  return {
    lookup: { orderId },
    refund: (order: { amount: number; card: { number: string } }): RefundParams => ({
      orderId,
      amount: order.amount,
      cardNumber: order.card.number,
      note: "Damaged on arrival",
    }),
  };
}

export function createDemoGraph(): Graph<DemoState> {
  return createGraph<DemoState>(demoGraphName).node("agent", async (state, ctx) => {
    const model = scriptedModel(state.orderId);
    const order = await tool(
      ctx,
      "lookup_order",
      model.lookup,
      () => ({
        id: state.orderId,
        amount: 42.5,
        currency: "EUR",
        item: "Espresso machine",
        card: { number: "4111 1111 1111 1111", holder: "A. Person" },
      }),
      { displayResult: (result) => redact(result, redacted) },
    );
    const params = model.refund(order);
    const shown = redact(params, redacted);
    const answer = await approve<DemoAnswer>(ctx, {
      // The approval and the refund share one tool-call id: cancelling the run at the approval shows
      // the refund's card as cancelled (the runner answers the pending approval on that card).
      toolCallId: refundCallId,
      title: "Run refund?",
      description: `Refund ${params.amount} EUR for order ${params.orderId}`,
      toolName: "refund",
      params,
      display: shown,
      // The person may edit the amount and the note; the resume checks edits against this schema.
      inputSchema: editableSchema,
    });
    if (!answer.approved) {
      // A rejected refund keeps its card, declined with the person's reason (a cancel's card the runner writes).
      if (answer.cancelled !== true) {
        toolTrace(ctx, {
          id: refundCallId,
          name: "refund",
          status: "declined",
          params: shown,
          ...(answer.reason === undefined ? {} : { reason: answer.reason }),
        });
      }
      return answer.cancelled === true
        ? { outcome: "cancelled" }
        : { outcome: "declined", ...(answer.reason === undefined ? {} : { reason: answer.reason }) };
    }
    // Edited arguments are the ones the person approved; the card number is never shown, so never edited.
    const edited = answer.editedArgs ?? {};
    const final: RefundParams = {
      ...params,
      ...(typeof edited.amount === "number" ? { amount: edited.amount } : {}),
      ...(typeof edited.note === "string" ? { note: edited.note } : {}),
    };
    try {
      const refund = await tool(
        ctx,
        "refund",
        final,
        (step) => {
          if (final.amount > order.amount) {
            throw new Error(
              `A refund cannot exceed the order's ${order.amount} ${order.currency} (asked ${final.amount})`,
            );
          }
          return {
            refundId: `rf-${state.orderId}`,
            amount: final.amount,
            note: final.note,
            idempotencyKey: step.idempotencyKey,
          };
        },
        { display: redact(final, redacted), id: refundCallId },
      );
      return { outcome: "refunded", refund };
    } catch (error) {
      // The tool's card shows the error; the run ends saying the refund failed, and why.
      return { outcome: "refund_failed", reason: (error as Error).message };
    }
  });
}
