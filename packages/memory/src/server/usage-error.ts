/** A refusal of `tackle-memory`'s command line: printed with the usage, exit 2. */
export class UsageError extends Error {}
