/**
 * `MeshPrefixConflictError` (ADR 0219): a module's subject prefix nests with one another module
 * already holds (`acme.a` and `acme.a.b`), so the two modules' tools could share a subject.
 */
import { hasBrand, setBrand } from "@tackle/core/internal";
import { MeshConfigError } from "./mesh-config-error.ts";

const meshPrefixConflictErrorBrand = Symbol.for("tackle.mesh.prefix-conflict-error");

/** The module refused and the one that holds the prefix it nests with. */
export interface PrefixConflict {
  /** The module refused. */
  readonly module: string;
  /** The prefix it was to be issued (or served) on. */
  readonly prefix: string;
  /** The module that already holds `heldPrefix`; `*` for every module (open mode's default prefixes). */
  readonly heldBy: string;
  /** The prefix `heldBy` holds, equal to `prefix`, under it or over it. */
  readonly heldPrefix: string;
  /** Where the held prefix was found, e.g. `node node-a's membership` or `the catalogue`. */
  readonly heldWhere?: string;
}

/** Thrown by `issueMembership`, `issueNodeCredential` and `issueClientCredential`; `code` is `invalid_mesh_config`. */
export class MeshPrefixConflictError extends MeshConfigError {
  /** The module refused. */
  readonly module: string;
  /** The prefix it was to be issued on. */
  readonly prefix: string;
  /** The module that holds `heldPrefix` (`*`: every module, at its default prefix). */
  readonly heldBy: string;
  /** The held prefix `prefix` nests with. */
  readonly heldPrefix: string;

  constructor(variable: string, conflict: PrefixConflict) {
    super(variable, describePrefixConflict(conflict));
    this.name = "MeshPrefixConflictError";
    this.module = conflict.module;
    this.prefix = conflict.prefix;
    this.heldBy = conflict.heldBy;
    this.heldPrefix = conflict.heldPrefix;
    setBrand(this, meshPrefixConflictErrorBrand);
  }

  /** True for a MeshPrefixConflictError from any copy of this package. */
  static override isInstance(value: unknown): value is MeshPrefixConflictError {
    return hasBrand(value, meshPrefixConflictErrorBrand);
  }
}

/** The sentence an operator reads: both modules, both prefixes, and a subject they would share. */
export function describePrefixConflict(conflict: PrefixConflict): string {
  const { module, prefix, heldBy, heldPrefix } = conflict;
  const where = conflict.heldWhere === undefined ? "" : ` (${conflict.heldWhere})`;
  const [outer, outerModule, inner, innerModule] =
    prefix.length <= heldPrefix.length
      ? [prefix, module, heldPrefix, heldBy]
      : [heldPrefix, heldBy, prefix, module];
  const shared =
    outer === inner
      ? `every tool of one is a tool of the other on ${outer}.<tool>`
      : `module ${named(outerModule)}'s tool ${inner.slice(outer.length + 1)}.x and module ${named(innerModule)}'s tool x are both ${inner}.x`;
  if (prefix === heldPrefix)
    return `prefix ${prefix} is already module ${heldBy}'s${where}: ${shared}; give ${module} its own`;
  const holder = heldBy === "*" ? "every module" : `module ${heldBy}`;
  return `prefix ${prefix} of module ${module} nests with prefix ${heldPrefix}, held by ${holder}${where}: ${shared}; give ${module} a prefix that neither starts with ${heldPrefix}. nor is a dot-prefix of it`;
}

function named(module: string): string {
  return module === "*" ? "<module>" : module;
}
