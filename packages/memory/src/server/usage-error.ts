/** A refusal of `tackle-memory`'s command line: printed with the usage, exit 2. */
export class UsageError extends Error {}

/** A refusal of `tackle-memory`'s configuration that one line says whole: printed alone, exit 2. */
export class ConfigError extends Error {}
