/**
 * `tackle-memory import <file>` (ADR 0544): a ChatGPT or Claude data export's `conversations.json`
 * imported into a running memory service. The file is cut by `splitChatExport` into imports within
 * `IMPORT_LIMITS`, and each import's job is waited for before the next starts, so a cut conversation's
 * parts join its session in order and a failed job stops the command before anything after it is
 * sent. Imports are idempotent: running the command again stores only what is missing.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { DEFAULT_MEMORY_URL, MemoryClient } from "../client/memory-client.ts";
import { type ChatExportFormat, splitChatExport } from "../client/split-chat-export.ts";
import { MemoryError } from "../errors/memory-error.ts";
import type { ImportConversationsRequest, MemoryJob } from "../schemas/admin.ts";
import { scopeIdSchema } from "../scope/memory-scope.ts";
import { UsageError } from "./usage-error.ts";

/** Seconds a job may take before the command stops waiting for it (a 4 MiB import with inference). */
const DEFAULT_JOB_TIMEOUT_S = 600;

export const importUsage = [
  "usage: tackle-memory import <conversations.json> --user <id> [--format auto|chatgpt-export|claude-export]",
  "                            [--agent <id>] [--url <service url>] [--api-key <key>] [--no-infer]",
  "                            [--timeout <seconds>]",
  "  imports a ChatGPT or Claude data export into a running tackle-memory serve, one job at a time",
  "  --user     the user whose memory the history joins",
  "  --format   auto (default: told apart by the conversations' shape), chatgpt-export or claude-export",
  "  --agent    the agent the history belongs to (default: none, the user's own memory)",
  "  --url      the service (TACKLE_MEMORY_URL; default http://127.0.0.1:4280)",
  "  --api-key  its API key (TACKLE_MEMORY_API_KEY; tackle-memory serve without keys wrote one to",
  "             memory-api-key beside its store)",
  "  --no-infer store the turns only, extracting no memories from them",
  `  --timeout  seconds each job may take before the command stops waiting (default ${DEFAULT_JOB_TIMEOUT_S})`,
  "exit 0: imported; 1: a job or the service failed (what was stored is printed; run it again to resume,",
  "an import stores only what is missing); 2: a bad command line or a file that is not such an export",
].join("\n");

/** The import's counts, as its job's result gives them (a failed job's: what it stored before failing). */
interface ImportResult {
  readonly conversations: number;
  readonly events: {
    readonly created: number;
    readonly existing: number;
    readonly skipped: number;
    readonly truncated: number;
  };
  readonly memories: number;
}

interface Totals {
  jobs: number;
  created: number;
  existing: number;
  skipped: number;
  truncated: number;
  memories: number;
}

interface ImportOptions {
  readonly file: string;
  readonly format: ChatExportFormat | "auto";
  readonly scope: { readonly userId: string; readonly agentId?: string };
  readonly infer: boolean;
  readonly timeoutMs: number;
  readonly client: MemoryClient;
}

/** Runs `tackle-memory import` with `argv` (after `import`); answers the exit code. */
export async function runImportCommand(
  argv: string[],
  environment: Readonly<Record<string, string | undefined>>,
): Promise<number> {
  let options: ImportOptions | "help";
  let exported: ReturnType<typeof readExport>;
  try {
    options = readOptions(argv, environment);
    if (options === "help") {
      process.stdout.write(`${importUsage}\n`);
      return 0;
    }
    exported = readExport(options.file, options.format);
  } catch (error) {
    const usage = error instanceof UsageError || isParseArgsError(error);
    process.stderr.write(`tackle-memory import: ${(error as Error).message}\n`);
    if (usage) process.stderr.write(`${importUsage}\n`);
    return 2;
  }
  if (exported === undefined) {
    process.stdout.write(`${options.file} holds no conversations: nothing to import\n`);
    return 0;
  }
  return importParts(options, exported);
}

function isParseArgsError(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code?.startsWith("ERR_PARSE_ARGS_") === true;
}

function readOptions(
  argv: string[],
  environment: Readonly<Record<string, string | undefined>>,
): ImportOptions | "help" {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    allowNegative: true,
    options: {
      format: { type: "string", default: "auto" },
      user: { type: "string" },
      agent: { type: "string" },
      url: { type: "string" },
      "api-key": { type: "string" },
      infer: { type: "boolean", default: true },
      timeout: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) return "help";
  if (positionals.length !== 1) {
    throw new UsageError(
      `import takes one file, the export's conversations.json; got ${positionals.length === 0 ? "none" : positionals.join(" ")}`,
    );
  }
  const format = values.format;
  if (format !== "auto" && format !== "chatgpt-export" && format !== "claude-export") {
    throw new UsageError(`--format takes auto, chatgpt-export or claude-export, got "${format}"`);
  }
  const userId = scopeId("--user", values.user);
  if (userId === undefined) throw new UsageError("--user <id> is required: the user whose memory it joins");
  const agentId = scopeId("--agent", values.agent);
  const timeout = values.timeout ?? String(DEFAULT_JOB_TIMEOUT_S);
  const seconds = /^\d+(\.\d+)?$/.test(timeout.trim()) ? Number(timeout) : Number.NaN;
  if (!(seconds > 0)) throw new UsageError(`--timeout takes seconds, a number above 0, got "${timeout}"`);
  const apiKey = values["api-key"] ?? (environment.TACKLE_MEMORY_API_KEY || undefined);
  if (apiKey === undefined) {
    throw new UsageError(
      "no API key: pass --api-key or set TACKLE_MEMORY_API_KEY (tackle-memory serve without keys wrote one to memory-api-key beside its store)",
    );
  }
  const url = values.url ?? (environment.TACKLE_MEMORY_URL || DEFAULT_MEMORY_URL);
  let client: MemoryClient;
  try {
    // The user runs this command and names the service: a private or loopback address is theirs to name.
    client = new MemoryClient({ baseUrl: url, apiKey, allowPrivateNetwork: true });
  } catch (error) {
    throw new UsageError(`--url / TACKLE_MEMORY_URL: ${(error as Error).message}`);
  }
  return {
    file: positionals[0] as string,
    format,
    scope: { userId, ...(agentId === undefined ? {} : { agentId }) },
    infer: values.infer,
    timeoutMs: Math.ceil(seconds * 1000),
    client,
  };
}

function scopeId(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const checked = scopeIdSchema.safeParse(value);
  if (checked.success) return checked.data;
  throw new UsageError(`${flag} takes an id: ${checked.error.issues[0]?.message}, got "${value}"`);
}

/** The file's conversations cut into imports; a file that is not an export of `format` is refused. */
function readExport(file: string, format: ChatExportFormat | "auto") {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new Error(`cannot read ${file}: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new Error(
      `${file} is not JSON (${(error as Error).message}): a data export's conversations.json is a JSON array`,
    );
  }
  const listed = Array.isArray(parsed) ? parsed : (parsed as { conversations?: unknown })?.conversations;
  if (!Array.isArray(listed)) {
    throw new Error(`${file} is not a data export: its conversations.json is an array of conversations`);
  }
  if (listed.length === 0) return undefined;
  const shape = shapeOf(listed);
  if (format === "auto" && shape === undefined) {
    throw new Error(
      `${file} is neither a ChatGPT export (conversations with mapping) nor a Claude export (conversations with chat_messages): pass --format if it is one`,
    );
  }
  if (format !== "auto" && shape !== undefined && shape !== format) {
    throw new Error(`${file} is a ${shape}, not a ${format}: pass --format ${shape} (or --format auto)`);
  }
  const chosen = format === "auto" ? (shape as ChatExportFormat) : format;
  try {
    return { format: chosen, parts: splitChatExport(chosen, listed), conversations: listed.length };
  } catch (error) {
    if (MemoryError.isInstance(error) && error.code === "invalid_input") {
      throw new Error(`${file} is not a ${chosen} this import takes: ${error.message}`);
    }
    throw error;
  }
}

/** The format every conversation's shape says (`mapping`: ChatGPT, `chat_messages`: Claude), if one. */
function shapeOf(conversations: readonly unknown[]): ChatExportFormat | undefined {
  const shapes = new Set(
    conversations.map((conversation) => {
      if (conversation === null || typeof conversation !== "object") return undefined;
      const chatgpt = "mapping" in conversation;
      const claude = "chat_messages" in conversation;
      return chatgpt === claude ? undefined : chatgpt ? "chatgpt-export" : "claude-export";
    }),
  );
  return shapes.size === 1 ? [...shapes][0] : undefined;
}

/** Each part's import started once the one before it finished; a failure stops the command, exit 1. */
async function importParts(
  options: ImportOptions,
  { format, parts, conversations }: { format: ChatExportFormat; parts: unknown[][]; conversations: number },
) {
  const { client, file, scope, infer, timeoutMs } = options;
  const totals: Totals = { jobs: 0, created: 0, existing: 0, skipped: 0, truncated: 0, memories: 0 };
  const stop = (what: string) => {
    process.stderr.write(
      `tackle-memory import: ${what}\n` +
        (totals.created + totals.existing === 0
          ? `nothing stored so far (${totals.jobs} of ${parts.length} jobs done)\n`
          : `stored so far (${totals.jobs} of ${parts.length} jobs done): ${describe(totals)}\n`) +
        "run the same command again to resume: an import stores only what is missing\n",
    );
    return 1;
  };
  for (const [index, part] of parts.entries()) {
    const label = `job ${index + 1}/${parts.length}`;
    let job: MemoryJob;
    try {
      ({ job } = await client.importConversations({
        ...scope,
        infer,
        format,
        conversations: part,
      } as ImportConversationsRequest));
      job = await waitFor(client, job, timeoutMs);
    } catch (error) {
      return stop(`${label}: ${(error as Error).message}`);
    }
    const result = job.result as ImportResult | undefined;
    if (result !== undefined) add(totals, result);
    if (job.status === "failed") {
      return stop(`${label} (${job.id}) failed: ${job.error?.code}: ${job.error?.message}`);
    }
    totals.jobs += 1;
    process.stdout.write(
      `${label} (${job.id}): ${counted(result?.conversations ?? 0, "conversation")}, ${describe(result ? totalsOf(result) : undefined)}\n`,
    );
  }
  process.stdout.write(
    `imported ${file} (${format}) for user ${scope.userId}${scope.agentId ? ` and agent ${scope.agentId}` : ""}: ` +
      `${counted(conversations, "conversation")} in ${counted(parts.length, "job")}, ${describe(totals)}\n`,
  );
  return 0;
}

/** The job once it succeeded or failed; past `timeoutMs` the command stops waiting, naming it. */
async function waitFor(client: MemoryClient, job: MemoryJob, timeoutMs: number): Promise<MemoryJob> {
  try {
    return await client.waitForJob(job.id, { timeoutMs, intervalMs: 200 });
  } catch (error) {
    if ((error as { code?: string }).code !== "timeout") throw error;
    throw new Error(
      `job ${job.id} did not finish within ${timeoutMs / 1000} s (--timeout); it may still be running`,
    );
  }
}

const totalsOf = (result: ImportResult): Totals => ({ jobs: 1, ...result.events, memories: result.memories });

function add(totals: Totals, result: ImportResult) {
  totals.created += result.events.created;
  totals.existing += result.events.existing;
  totals.skipped += result.events.skipped;
  totals.truncated += result.events.truncated;
  totals.memories += result.memories;
}

const counted = (count: number, noun: string) => `${count} ${noun}${count === 1 ? "" : "s"}`;

function describe(totals: Totals | undefined): string {
  if (totals === undefined) return "no counts";
  const truncated = totals.truncated > 0 ? `, ${totals.truncated} cut to the event limit` : "";
  return `turns ${totals.created} created, ${totals.existing} existing, ${totals.skipped} skipped${truncated}, ${totals.memories} memories`;
}
