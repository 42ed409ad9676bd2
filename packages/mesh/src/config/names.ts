/** The name rules the mesh shares: module and node names become NATS subject tokens and KV keys. */

/** A module name: one subject token, no dots (`module.tool` splits on the first dot). */
export const moduleNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

/** A node name: one subject token and one KV key segment. */
export const nodeNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

/** A subject prefix: dot-separated tokens, no wildcards, no spaces. */
export const subjectPrefixPattern = /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/;

/** Where a module's tools answer when no membership names a prefix. */
export function defaultModulePrefix(module: string): string {
  return `tackle.tools.${module}`;
}

/** Where a seat's verbs answer when the membership gives the seat no subject. */
export function defaultSeatPrefix(seat: string): string {
  return `tackle.seats.${seat}`;
}
