/**
 * Prefixes that nest (ADR 0219): a module's tools answer on `<prefix>.<tool>` and a tool's name may
 * hold dots, so module `acme.a`'s tool `b.x` and module `acme.a.b`'s tool `x` are one subject, and a
 * credential's `acme.a.>` reaches all of `acme.a.b.>`. No two modules may hold prefixes that nest.
 */
import { defaultModulePrefix } from "../config/names.ts";
import { MeshPrefixConflictError, type PrefixConflict } from "../errors/mesh-prefix-conflict-error.ts";

/** True when one prefix equals the other or is a dot-prefix of it (`acme.a` and `acme.a.b`, not `acme.ab`). */
export function prefixesNest(left: string, right: string): boolean {
  return left === right || right.startsWith(`${left}.`) || left.startsWith(`${right}.`);
}

/** A prefix some module holds, and where that was read. */
export interface HeldPrefix {
  readonly module: string;
  readonly prefix: string;
  readonly where?: string;
}

/**
 * The first prefix another module holds that nests with `prefix`; a module's own prefixes (where it
 * was, where it moves) never conflict with it. Also a prefix every module's default prefix
 * (`tackle.tools.<module>`, where open mode serves) starts with: `tackle` and `tackle.tools`.
 */
export function findPrefixConflict(
  module: string,
  prefix: string,
  held: Iterable<HeldPrefix>,
): PrefixConflict | undefined {
  const anyDefault = defaultModulePrefix("<module>");
  if (anyDefault.startsWith(`${prefix}.`)) {
    return { module, prefix, heldBy: "*", heldPrefix: anyDefault, heldWhere: "where open mode serves it" };
  }
  for (const other of held) {
    if (other.module === module || !prefixesNest(prefix, other.prefix)) continue;
    return {
      module,
      prefix,
      heldBy: other.module,
      heldPrefix: other.prefix,
      ...(other.where === undefined ? {} : { heldWhere: other.where }),
    };
  }
  return undefined;
}

/** Throws `MeshPrefixConflictError` (naming `variable`) when `prefix` nests with another module's. */
export function refuseNestedPrefix(
  variable: string,
  module: string,
  prefix: string,
  held: Iterable<HeldPrefix>,
): void {
  const conflict = findPrefixConflict(module, prefix, held);
  if (conflict !== undefined) throw new MeshPrefixConflictError(variable, conflict);
}

/** Throws when two of `modules` (one credential's reach) hold prefixes that nest. */
export function refuseNestedReach(variable: string, modules: readonly HeldPrefix[]): void {
  modules.forEach((reach, index) => {
    refuseNestedPrefix(variable, reach.module, reach.prefix, modules.slice(0, index));
  });
}
