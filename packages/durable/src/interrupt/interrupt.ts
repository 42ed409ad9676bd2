/** A pause for a human: thrown through a node, never a failure, carrying core's control-flow brand. */
import { controlFlowBrand } from "@tackle/core";
import { hasBrand } from "@tackle/core/internal";

const interruptBrand = Symbol.for("tackle.durable.interrupt");

/** One open question of a paused run. */
export interface InterruptRequest {
  readonly id: string;
  readonly request: unknown;
}

export class Interrupt extends Error {
  // The brand makes toolset.call, tracing and every adapter pass this error through untouched.
  readonly [controlFlowBrand] = true;
  readonly [interruptBrand] = true;
  readonly interrupts: readonly InterruptRequest[];

  constructor(interrupts: readonly InterruptRequest[]) {
    super(`Run paused for ${interrupts.map((entry) => entry.id).join(", ")}`);
    this.name = "Interrupt";
    this.interrupts = interrupts;
  }
}

/** True for an interrupt from any copy of this package. */
export function isInterrupt(value: unknown): value is Interrupt {
  return hasBrand(value, interruptBrand);
}
