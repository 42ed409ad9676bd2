import { hasBrand } from "./brand.ts";

/**
 * Some throws are not failures: a durable run's interrupt unwinds through a tool on purpose.
 * An error carrying this brand passes through every Tackle layer untouched, never reported as a tool error.
 */
export const controlFlowBrand: unique symbol = Symbol.for("tackle.control-flow") as never;

export function isControlFlow(value: unknown): boolean {
  return hasBrand(value, controlFlowBrand);
}
