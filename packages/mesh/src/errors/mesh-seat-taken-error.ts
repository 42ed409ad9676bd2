/**
 * `MeshSeatTakenError` (ADR 0224): a seat is a name a caller calls (`callSeat(seat, verb)`), so it
 * answers for one module. Issuing a seat another module already holds is refused, whatever subject
 * each would answer on; the same module may hold its seat on several nodes.
 */
import { hasBrand, setBrand } from "@tackle/core/internal";
import { MeshConfigError } from "./mesh-config-error.ts";

const meshSeatTakenErrorBrand = Symbol.for("tackle.mesh.seat-taken-error");

/** Thrown by `issueMembership`; `code` is `invalid_mesh_config`. */
export class MeshSeatTakenError extends MeshConfigError {
  /** The module refused. */
  readonly module: string;
  /** The seat it was to hold. */
  readonly seat: string;
  /** The module that holds `seat`. */
  readonly heldBy: string;
  /** Where the holder's record was read, e.g. `node node-a's membership`. */
  readonly heldWhere: string;

  constructor(variable: string, taken: { module: string; seat: string; heldBy: string; heldWhere: string }) {
    super(
      variable,
      `seat ${taken.seat} of module ${taken.module} is already held by module ${taken.heldBy} (${taken.heldWhere}): a seat answers for one module; revoke it there first, or name the seat otherwise`,
    );
    this.name = "MeshSeatTakenError";
    this.module = taken.module;
    this.seat = taken.seat;
    this.heldBy = taken.heldBy;
    this.heldWhere = taken.heldWhere;
    setBrand(this, meshSeatTakenErrorBrand);
  }

  /** True for a MeshSeatTakenError from any copy of this package. */
  static override isInstance(value: unknown): value is MeshSeatTakenError {
    return hasBrand(value, meshSeatTakenErrorBrand);
  }
}
