/**
 * `MemoryClient.importExport`: a ChatGPT or Claude export cut into imports within `IMPORT_LIMITS`
 * (`splitChatExport`), each part sent once the job before it finished (ADR 0550), so a cut
 * conversation joins its session in order whichever service process runs each part.
 */
import { MemoryError, type MemoryErrorCode } from "../errors/memory-error.ts";
import type { ImportConversationsRequest, MemoryJob } from "../schemas/admin.ts";
import type { ImportExportRequest, MemoryClient, WriteCallOptions } from "./memory-client.ts";
import { splitChatExport } from "./split-chat-export.ts";

/** How `importExport` sends its parts. */
export interface ImportExportOptions extends WriteCallOptions {
  /**
   * Default `true`: each part's job is waited for (polled) before the next part is sent, so a
   * conversation cut into parts joins its session in order whatever service process runs each job,
   * and a failed job stops the import. `false` starts every part at once and answers their queued
   * jobs (one service process runs them in order; processes sharing a store may run them at once).
   */
  readonly wait?: boolean;
  /** How long each job may take when waited for (default 600 000 ms, as `tackle-memory import --timeout`). */
  readonly jobTimeoutMs?: number;
}

/** How long `importExport` waits for one part's job by default: a 4 MiB import with inference. */
const defaultJobTimeoutMs = 600_000;

export async function importExport(
  client: MemoryClient,
  request: ImportExportRequest,
  options: ImportExportOptions,
): Promise<{ jobs: MemoryJob[] }> {
  const { wait = true, jobTimeoutMs = defaultJobTimeoutMs, ...callOptions } = options;
  const { export: exported, format, ...rest } = request;
  const parts = splitChatExport(format, exported);
  const jobs: MemoryJob[] = [];
  for (const [index, conversations] of parts.entries()) {
    const { job } = await client.importConversations(
      { ...rest, format, conversations } as ImportConversationsRequest,
      // One key per part: a caller's key names the whole export, each part's is its own.
      callOptions.idempotencyKey === undefined
        ? callOptions
        : { ...callOptions, idempotencyKey: `${callOptions.idempotencyKey}:${index}` },
    );
    if (!wait) {
      jobs.push(job);
      continue;
    }
    const done = await client.waitForJob(job.id, {
      timeoutMs: jobTimeoutMs,
      ...(callOptions.signal === undefined ? {} : { signal: callOptions.signal }),
    });
    jobs.push(done);
    if (done.status === "failed") throw importFailed(done, jobs, index, parts.length);
  }
  return { jobs };
}

/** A part's job failed: its code and message, what the jobs so far stored, and how to resume. */
function importFailed(job: MemoryJob, jobs: MemoryJob[], index: number, parts: number): MemoryError {
  const code = (job.error?.code ?? "internal") as MemoryErrorCode;
  return new MemoryError(
    code,
    `Import part ${index + 1} of ${parts} (job ${job.id}) failed: ${job.error?.message ?? "no message"}; ` +
      "the parts before it are stored, and importing the export again stores only what is missing",
    code === "quota_exceeded" ? 409 : code === "invalid_input" ? 400 : 500,
    { retryable: false, data: { job, jobs, parts } },
  );
}
