/**
 * The example's outside world: an order service and a payment service that write every call to a
 * ledger file, so a test can count calls across processes.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";

export interface Order {
  readonly id: string;
  readonly total: number;
  readonly currency: string;
}

export interface LedgerEntry {
  readonly call: "Orders.get" | "Payments.refund";
  readonly orderId: string;
  readonly idempotencyKey?: string;
}

export function createServices(ledgerPath: string) {
  const record = (entry: LedgerEntry) => appendFileSync(ledgerPath, `${JSON.stringify(entry)}\n`);
  return {
    Orders: {
      async get(id: string): Promise<Order> {
        record({ call: "Orders.get", orderId: id });
        return { id, total: 249.9, currency: "EUR" };
      },
    },
    Payments: {
      /** The key lets a real payment provider drop a duplicate after a crash-window re-run. */
      async refund(order: Order, idempotencyKey: string): Promise<{ refundId: string }> {
        record({ call: "Payments.refund", orderId: order.id, idempotencyKey });
        return { refundId: `rf_${order.id}` };
      },
    },
  };
}

export function readLedger(ledgerPath: string): LedgerEntry[] {
  if (!existsSync(ledgerPath)) return [];
  return readFileSync(ledgerPath, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as LedgerEntry);
}
