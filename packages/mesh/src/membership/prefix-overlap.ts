/**
 * Subject prefixes that overlap (ADRs 0219, 0220). Everything a mesh serves answers under a prefix:
 * a module's tools on `<prefix>.<tool>` (a tool's name may hold dots) and a seat's verbs on
 * `<subject>.<verb>` (`tackle.seats.<seat>` by default). Two parties on prefixes that nest — equal,
 * or one a dot-prefix of the other — answer each other's subjects, and a credential's `<prefix>.>`
 * reaches both. One rule over every party: no two of them hold prefixes that nest.
 */
import { defaultModulePrefix, defaultSeatPrefix } from "../config/names.ts";
import { MeshPrefixConflictError, type PrefixConflict } from "../errors/mesh-prefix-conflict-error.ts";

/** True when one prefix equals the other or is a dot-prefix of it (`acme.a` and `acme.a.b`, not `acme.ab`). */
export function prefixesNest(left: string, right: string): boolean {
  return left === right || right.startsWith(`${left}.`) || left.startsWith(`${right}.`);
}

/** A prefix some party holds — module `module`'s tools, or its seat `seat`'s verbs — and where that was read. */
export interface HeldPrefix {
  readonly module: string;
  /** The seat whose verbs answer on `prefix`; absent for the module's tools. */
  readonly seat?: string | undefined;
  readonly prefix: string;
  readonly where?: string;
}

/** A party to the rule: module `module`'s tools, or its seat `seat`'s verbs. */
export type PrefixParty = Omit<HeldPrefix, "where">;

/**
 * The same party may hold several prefixes (a module moved on one node, a seat held on several
 * nodes): its tools or verbs are one bundle's (ADR 0206), so they never conflict with each other.
 */
function sameParty(left: PrefixParty, right: PrefixParty): boolean {
  return left.module === right.module && left.seat === right.seat;
}

/**
 * Prefixes over every default one, which open mode serves (`tackle.tools.<module>`) or a seat issued
 * without a subject gets (`tackle.seats.<seat>`), before any record names them: `tackle`,
 * `tackle.tools` and `tackle.seats`.
 */
const everyDefault: readonly (HeldPrefix & { readonly example: string })[] = [
  {
    module: "*",
    prefix: defaultModulePrefix(""),
    example: defaultModulePrefix("<module>"),
    where: "where open mode serves it",
  },
  {
    module: "*",
    seat: "*",
    prefix: defaultSeatPrefix(""),
    example: defaultSeatPrefix("<seat>"),
    where: "where a seat issued without a subject answers",
  },
];

/** The first prefix another party holds that nests with `party`'s, or one over every default prefix. */
export function findPrefixConflict(
  party: PrefixParty,
  held: Iterable<HeldPrefix>,
): PrefixConflict | undefined {
  const refused = {
    module: party.module,
    prefix: party.prefix,
    ...(party.seat === undefined ? {} : { seat: party.seat }),
  };
  for (const reserved of everyDefault) {
    // `tackle.tools.` is a dot-prefix of every default module prefix: `tackle.tools` and `tackle` lie over them.
    if (!reserved.prefix.startsWith(`${party.prefix}.`)) continue;
    return {
      ...refused,
      heldBy: reserved.module,
      ...(reserved.seat === undefined ? {} : { heldSeat: reserved.seat }),
      heldPrefix: reserved.example,
      ...(reserved.where === undefined ? {} : { heldWhere: reserved.where }),
    };
  }
  for (const other of held) {
    if (sameParty(party, other) || !prefixesNest(party.prefix, other.prefix)) continue;
    return {
      ...refused,
      heldBy: other.module,
      ...(other.seat === undefined ? {} : { heldSeat: other.seat }),
      heldPrefix: other.prefix,
      ...(other.where === undefined ? {} : { heldWhere: other.where }),
    };
  }
  return undefined;
}

/** Every party a module brings: its tools on `prefix`, and each seat's verbs on its subject. */
export function partiesOf(
  reach: {
    readonly module: string;
    readonly prefix: string;
    readonly seats?: Readonly<Record<string, string>>;
  },
  where?: string,
): HeldPrefix[] {
  const at = where === undefined ? {} : { where };
  return [
    { module: reach.module, prefix: reach.prefix, ...at },
    ...Object.entries(reach.seats ?? {}).map(([seat, subject]) => ({
      module: reach.module,
      seat,
      prefix: subject,
      ...at,
    })),
  ];
}

/**
 * The first conflict of any of `parties` with `held`, or among `parties` themselves (a seat under its
 * own module's prefix answers where the module's tools do: seat `pad` on `acme.notes.x` and tool
 * `x.y` are both `acme.notes.x.y`, and a seat on `acme.notes` answers the listing `acme.notes.tools`).
 */
export function findConflictAmong(
  parties: readonly HeldPrefix[],
  held: readonly HeldPrefix[],
  ownWhere: string,
): PrefixConflict | undefined {
  for (const [index, party] of parties.entries()) {
    const earlier = parties.slice(0, index).map((other) => ({ ...other, where: ownWhere }));
    // Another module's party first: the operator learns whom the prefix collides with.
    const conflict = findPrefixConflict(party, [...held, ...earlier]);
    if (conflict !== undefined) return conflict;
  }
  return undefined;
}

/** Throws `MeshPrefixConflictError` (naming `variable`) when one of `parties` nests with another party's prefix. */
export function refuseNestedPrefix(
  variable: string,
  parties: readonly HeldPrefix[],
  held: readonly HeldPrefix[],
  ownWhere: string,
): void {
  const conflict = findConflictAmong(parties, held, ownWhere);
  if (conflict !== undefined) throw new MeshPrefixConflictError(variable, conflict);
}

/** Throws when two of the prefixes `modules` serve (one credential's reach: tools and seats) nest. */
export function refuseNestedReach(
  variable: string,
  modules: readonly {
    readonly module: string;
    readonly prefix: string;
    readonly seats?: Readonly<Record<string, string>>;
  }[],
): void {
  refuseNestedPrefix(
    variable,
    modules.flatMap((reach) => partiesOf(reach)),
    [],
    "the same credential",
  );
}
