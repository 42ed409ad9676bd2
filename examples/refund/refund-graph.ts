/** The refund node: look the order up once, ask a human, refund only on the far side of the approval. */
import { approve, createGraph, tool } from "@tackle/durable";
import type { createServices } from "./services.ts";

export interface RefundState {
  readonly input: string;
  readonly reply?: string;
}

export function createRefundGraph(services: ReturnType<typeof createServices>) {
  const { Orders, Payments } = services;
  return createGraph<RefundState>("refund").node("refund", async (state, ctx) => {
    // Journaled: on the resume pass this returns the recorded order; Orders.get is not called again.
    const order = await tool(ctx, "get_order", { id: state.input }, () => Orders.get(state.input));
    const ok = await approve(ctx, { title: `Refund ${order.total} ${order.currency}?`, params: order });
    if (!ok.approved) return { reply: "kept" };
    // The side effect that must happen once sits after the approval, and is journaled too.
    const refund = await tool(ctx, "refund", { id: order.id, amount: order.total }, (step) =>
      Payments.refund(order, step.idempotencyKey),
    );
    return { reply: `refunded (${refund.refundId})` };
  });
}
