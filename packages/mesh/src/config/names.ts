/** The name rules the mesh shares: module and node names become NATS subject tokens and KV keys. */

/** A module name: one subject token, no dots (`module.tool` splits on the first dot). */
export const moduleNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

/** A node name: one subject token and one KV key segment. */
export const nodeNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

/** A subject prefix: dot-separated tokens, no wildcards, no spaces. */
export const subjectPrefixPattern = /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/;

/**
 * A tool's name as it rides on the bus (`<prefix>.<tool>`): dot-separated, non-empty tokens, so no
 * wildcard (`*`, `>`), whitespace or empty token can address another subject. A runtime refuses a
 * bundle's tool that does not match at load; a client refuses a call naming one before sending it.
 */
export const toolSubjectPattern = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

/** The name every runtime answers for a module's listing (and `tools.*` for control); no tool may take it. */
export const RESERVED_TOOL_NAME = "tools";

/** Why `tool` cannot be a tool's name on the bus, or undefined when it can. */
export function toolNameProblem(tool: string): string | undefined {
  if (!toolSubjectPattern.test(tool))
    return "a tool name on the bus is dot-separated, non-empty parts of A-Z, a-z, 0-9, _ and - (no wildcard, space or empty part)";
  if (tool === RESERVED_TOOL_NAME || tool.startsWith(`${RESERVED_TOOL_NAME}.`))
    return `"${RESERVED_TOOL_NAME}" and "${RESERVED_TOOL_NAME}.*" are the module's listing and control subjects, not tools`;
  return undefined;
}

/** Where a module's tools answer when no membership names a prefix. */
export function defaultModulePrefix(module: string): string {
  return `tackle.tools.${module}`;
}

/** Where a seat's verbs answer when the membership gives the seat no subject. */
export function defaultSeatPrefix(seat: string): string {
  return `tackle.seats.${seat}`;
}
