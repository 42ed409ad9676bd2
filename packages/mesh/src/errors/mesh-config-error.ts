/** `MeshConfigError`: a mesh variable is missing or malformed; `variable` names it. */
import { hasBrand, setBrand } from "@tackle/core/internal";

const meshConfigErrorBrand = Symbol.for("tackle.mesh.config-error");

export class MeshConfigError extends Error {
  readonly code = "invalid_mesh_config";
  /** The environment variable (or option) at fault, e.g. `MESH_TOOL_MODULES`. */
  readonly variable: string;

  constructor(variable: string, message: string, options: { cause?: unknown } = {}) {
    super(`${variable}: ${message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "MeshConfigError";
    this.variable = variable;
    setBrand(this, meshConfigErrorBrand);
  }

  /** True for a MeshConfigError from any copy of this package. */
  static isInstance(value: unknown): value is MeshConfigError {
    return hasBrand(value, meshConfigErrorBrand);
  }
}
