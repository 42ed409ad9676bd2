/**
 * `MeshPrefixConflictError` (ADRs 0219, 0220): a subject prefix a module's tools or one of its seats'
 * verbs would answer on nests with one another party already holds (`acme.a` and `acme.a.b`, or a
 * module on `tackle.seats.pad` and seat `pad`), so the two could answer each other's subjects.
 */
import { hasBrand, setBrand } from "@tackle/core/internal";
import { MeshConfigError } from "./mesh-config-error.ts";

const meshPrefixConflictErrorBrand = Symbol.for("tackle.mesh.prefix-conflict-error");

/** The party refused and the one that holds the prefix it nests with. */
export interface PrefixConflict {
  /** The module refused. */
  readonly module: string;
  /** The module's seat refused, when the refused prefix is a seat's subject; absent for its tools. */
  readonly seat?: string;
  /** The prefix it was to be issued (or served) on. */
  readonly prefix: string;
  /** The module that already holds `heldPrefix`; `*` for every module (the default prefixes). */
  readonly heldBy: string;
  /** The seat of `heldBy` whose subject `heldPrefix` is (`*`: every seat); absent for `heldBy`'s tools. */
  readonly heldSeat?: string;
  /** The prefix `heldBy` holds, equal to `prefix`, under it or over it. */
  readonly heldPrefix: string;
  /** Where the held prefix was found, e.g. `node node-a's membership` or `the catalogue`. */
  readonly heldWhere?: string;
}

/** Thrown by `issueMembership`, `issueNodeCredential` and `issueClientCredential`; `code` is `invalid_mesh_config`. */
export class MeshPrefixConflictError extends MeshConfigError {
  /** The module refused. */
  readonly module: string;
  /** The seat refused (its subject is `prefix`); undefined when the module's tools were refused. */
  readonly seat: string | undefined;
  /** The prefix it was to be issued on. */
  readonly prefix: string;
  /** The module that holds `heldPrefix` (`*`: every module, at its default prefix). */
  readonly heldBy: string;
  /** The seat of `heldBy` whose subject is `heldPrefix`; undefined when it is `heldBy`'s tools' prefix. */
  readonly heldSeat: string | undefined;
  /** The held prefix `prefix` nests with. */
  readonly heldPrefix: string;

  constructor(variable: string, conflict: PrefixConflict) {
    super(variable, describePrefixConflict(conflict));
    this.name = "MeshPrefixConflictError";
    this.module = conflict.module;
    this.seat = conflict.seat;
    this.prefix = conflict.prefix;
    this.heldBy = conflict.heldBy;
    this.heldSeat = conflict.heldSeat;
    this.heldPrefix = conflict.heldPrefix;
    setBrand(this, meshPrefixConflictErrorBrand);
  }

  /** True for a MeshPrefixConflictError from any copy of this package. */
  static override isInstance(value: unknown): value is MeshPrefixConflictError {
    return hasBrand(value, meshPrefixConflictErrorBrand);
  }
}

/** A party as an operator reads it: `module notes`, `module notes's seat pad`, `every module`, `every seat`. */
function party(module: string, seat: string | undefined): string {
  if (module === "*") return seat === undefined ? "every module" : "every seat";
  return seat === undefined ? `module ${module}` : `module ${module}'s seat ${seat}`;
}

/** One subject of a party: `module outer's tool b.x`, `module notes's seat pad's verb x`. */
function item(module: string, seat: string | undefined, rest: string): string {
  if (module === "*")
    return seat === undefined ? `module <module>'s tool ${rest}` : `seat <seat>'s verb ${rest}`;
  return seat === undefined
    ? `module ${module}'s tool ${rest}`
    : `module ${module}'s seat ${seat}'s verb ${rest}`;
}

/** The sentence an operator reads: both parties, both prefixes, and a subject they would share. */
export function describePrefixConflict(conflict: PrefixConflict): string {
  const { module, seat, prefix, heldBy, heldSeat, heldPrefix } = conflict;
  const where = conflict.heldWhere === undefined ? "" : ` (${conflict.heldWhere})`;
  const refused = party(module, seat);
  const held = party(heldBy, heldSeat);
  const refusedIsOuter = prefix.length <= heldPrefix.length;
  const [outer, inner] = refusedIsOuter ? [prefix, heldPrefix] : [heldPrefix, prefix];
  const [outerParty, innerParty] = refusedIsOuter
    ? [[module, seat] as const, [heldBy, heldSeat] as const]
    : [[heldBy, heldSeat] as const, [module, seat] as const];
  const shared =
    outer === inner
      ? `every ${seat === undefined ? "tool" : "verb"} of one is ${heldSeat === undefined ? "a tool" : "a verb"} of the other on ${outer}.<name>`
      : `${item(...outerParty, `${inner.slice(outer.length + 1)}.x`)} and ${item(...innerParty, "x")} are both ${inner}.x`;
  if (prefix === heldPrefix)
    return `prefix ${prefix} is already ${held}'s${where}: ${shared}; give ${refused} its own`;
  return `prefix ${prefix} of ${refused} nests with prefix ${heldPrefix}, held by ${held}${where}: ${shared}; give ${refused} a prefix that neither starts with ${heldPrefix}. nor is a dot-prefix of it`;
}
