/**
 * The limits `tackle-memory serve` takes as flags or environment variables — the rate, requests in
 * flight, retention (ADR 0537) and storage quotas (ADRs 0538, 0551, 0556) — each checked before the service starts:
 * a value that is not a limit stops the start naming its flag, never a silently different limit.
 */
import type { MemoryQuotaOptions } from "../service/quotas.ts";
import type { MemoryRetentionOptions } from "../service/retention.ts";
import type { RateLimit } from "./rate-limiter.ts";
import { UsageError } from "./usage-error.ts";

type Kind = "count" | "days" | "quota" | "bytes";

interface LimitFlag {
  /** The flag without its dashes; its environment variable is TACKLE_MEMORY_ and it in capitals. */
  readonly flag: string;
  readonly kind: Kind;
  readonly help: string;
  /** The service's default, as the usage shows it. */
  readonly fallback: string;
}

/** `inFlight`: the `maxInFlight` of `serveMemory`; the others are named by their option. */
const groups = {
  inFlight: [
    {
      flag: "max-in-flight",
      kind: "count",
      help: "requests with a body a tenant may have in flight at once",
      fallback: "64",
    },
  ],
  retention: [
    {
      flag: "max-traces-per-tenant",
      kind: "count",
      help: "retrieval traces kept, the newest",
      fallback: "10000",
    },
    {
      flag: "max-traces-per-user",
      kind: "count",
      help: "retrieval traces each user keeps, the newest",
      fallback: "a tenth of the tenant's",
    },
    { flag: "trace-retention-days", kind: "days", help: "days a retrieval trace is kept", fallback: "30" },
    { flag: "access-retention-days", kind: "days", help: "days of access counts kept", fallback: "365" },
    {
      flag: "max-finished-jobs-per-tenant",
      kind: "count",
      help: "finished jobs kept, the newest",
      fallback: "1000",
    },
    {
      flag: "max-finished-jobs-per-user",
      kind: "count",
      help: "finished jobs each user keeps, the newest",
      fallback: "a tenth of the tenant's",
    },
    { flag: "job-retention-days", kind: "days", help: "days a finished job is kept", fallback: "30" },
  ],
  quotas: [
    {
      flag: "max-memories",
      kind: "quota",
      help: "memory rows, any status until purged",
      fallback: "1000000",
    },
    {
      flag: "max-memory-bytes",
      kind: "bytes",
      help: "bytes of memory content, every version",
      fallback: "1GiB",
    },
    { flag: "max-events", kind: "quota", help: "conversation events", fallback: "10000000" },
    { flag: "max-event-bytes", kind: "bytes", help: "bytes of event content", fallback: "4GiB" },
    {
      flag: "max-document-bytes",
      kind: "bytes",
      help: "bytes of knowledge-document chunks",
      fallback: "1GiB",
    },
    {
      flag: "max-metadata-bytes",
      kind: "bytes",
      help: "bytes of metadata: memory versions, events, documents",
      fallback: "1GiB",
    },
    { flag: "max-core-blocks", kind: "quota", help: "core-memory blocks, every scope", fallback: "10000" },
    {
      flag: "max-core-block-bytes",
      kind: "bytes",
      help: "bytes of core-memory blocks, every scope",
      fallback: "64MiB",
    },
    { flag: "max-queued-jobs", kind: "quota", help: "jobs queued or running", fallback: "100" },
  ],
} as const satisfies Record<string, readonly LimitFlag[]>;

const allFlags: readonly LimitFlag[] = [...groups.inFlight, ...groups.retention, ...groups.quotas];

/** The flags for `parseArgs`: `--rate-limit` and every limit above, each a string. */
export const limitFlagOptions = Object.fromEntries(
  ["rate-limit", ...allFlags.map(({ flag }) => flag)].map((flag) => [flag, { type: "string" as const }]),
);

const environmentName = (flag: string) => `TACKLE_MEMORY_${flag.toUpperCase().replaceAll("-", "_")}`;

/** The usage lines of the limit flags. */
export function limitFlagUsage(): string[] {
  const line = ({ flag, help, fallback }: Omit<LimitFlag, "kind">) =>
    `  --${flag.padEnd(29)} ${help}\n${" ".repeat(34)}(${environmentName(flag)}; default ${fallback})`;
  return [
    "limits per tenant (a bad value refuses to start, naming its flag):",
    line({ flag: "rate-limit", help: "requests per second, 0 for none", fallback: "none" }),
    ...groups.inFlight.map(line),
    " retention, whole numbers of at least 1:",
    ...groups.retention.map(line),
    " storage quotas, whole numbers of 0 or more, or off; bytes may end in KiB, MiB, GiB or TiB:",
    ...groups.quotas.map(line),
  ];
}

export interface ServeLimits {
  readonly rateLimit?: RateLimit;
  readonly maxInFlight?: number;
  readonly retention?: MemoryRetentionOptions;
  readonly quotas?: MemoryQuotaOptions;
}

/**
 * The limits given by flag or else by environment variable (an empty variable counts as unset);
 * those given neither way are left out, so the service's defaults hold.
 */
export function readLimitFlags(
  values: Readonly<Record<string, unknown>>,
  environment: Readonly<Record<string, string | undefined>>,
): ServeLimits {
  const raw = (flag: string): string | undefined => {
    const given = values[flag];
    if (typeof given === "string") return given;
    return environment[environmentName(flag)] || undefined;
  };
  const read = (flags: readonly LimitFlag[]) => {
    const read: Record<string, number> = {};
    for (const { flag, kind } of flags) {
      const text = raw(flag);
      if (text !== undefined) read[optionName(flag)] = parseLimit(flag, kind, text);
    }
    return Object.keys(read).length > 0 ? read : undefined;
  };
  const rate = raw("rate-limit");
  const requestsPerSecond = rate === undefined ? 0 : parseRate(rate);
  const inFlight = read(groups.inFlight);
  const retention = read(groups.retention);
  const quotas = read(groups.quotas);
  return {
    ...(requestsPerSecond > 0 ? { rateLimit: { requestsPerSecond } } : {}),
    ...(inFlight ? { maxInFlight: inFlight.maxInFlight! } : {}),
    ...(retention ? { retention } : {}),
    ...(quotas ? { quotas } : {}),
  };
}

/** `max-traces-per-tenant` → `maxTracesPerTenant`, the option's own name. */
const optionName = (flag: string) => flag.replace(/-(\w)/g, (_, letter: string) => letter.toUpperCase());

const units: Readonly<Record<string, number>> = {
  "": 1,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
};

function parseLimit(flag: string, kind: Kind, text: string): number {
  const trimmed = text.trim();
  const off = kind === "quota" || kind === "bytes";
  if (off && trimmed.toLowerCase() === "off") return Number.POSITIVE_INFINITY;
  const match = (kind === "bytes" ? /^(\d+)\s*([KMGT]iB)?$/i : /^(\d+)$/).exec(trimmed);
  const value = match ? Number(match[1]) * units[(match[2] ?? "").toLowerCase()]! : Number.NaN;
  const least = off ? 0 : 1;
  if (Number.isSafeInteger(value) && value >= least) return value;
  const what = {
    count: "a whole number of at least 1",
    days: "a whole number of days, at least 1",
    quota: "a whole number of 0 or more, or off",
    bytes: "a whole number of bytes of 0 or more (it may end in KiB, MiB, GiB or TiB), or off",
  }[kind];
  throw new UsageError(`--${flag} / ${environmentName(flag)} takes ${what}, got "${text}"`);
}

function parseRate(text: string): number {
  const trimmed = text.trim();
  const value = /^\d+(\.\d+)?$/.test(trimmed) ? Number(trimmed) : Number.NaN;
  if (Number.isFinite(value)) return value;
  throw new UsageError(
    `--rate-limit / TACKLE_MEMORY_RATE_LIMIT takes requests per second, a number of 0 (none) or more, got "${text}"`,
  );
}
