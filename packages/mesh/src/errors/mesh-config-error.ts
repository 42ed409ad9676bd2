/** `MeshConfigError`: a mesh variable is missing or malformed; `variable` names it. */
const meshConfigErrorBrand = Symbol.for("tackle.mesh.config-error");

export class MeshConfigError extends Error {
  readonly [meshConfigErrorBrand] = true;
  readonly code = "invalid_mesh_config";
  /** The environment variable (or option) at fault, e.g. `MESH_TOOL_MODULES`. */
  readonly variable: string;

  constructor(variable: string, message: string, options: { cause?: unknown } = {}) {
    super(`${variable}: ${message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "MeshConfigError";
    this.variable = variable;
  }

  /** True for a MeshConfigError from any copy of this package. */
  static isInstance(value: unknown): value is MeshConfigError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as Record<symbol, unknown>)[meshConfigErrorBrand] === true
    );
  }
}
