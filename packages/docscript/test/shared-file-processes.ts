/**
 * What `shared-file-creates.property.test.ts` drives and looks at: store processes on one SQLite file
 * (`shared-file-creates-child.ts`), asked over IPC and killed at will, and the file read as it is.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { DatabaseSync } from "node:sqlite";
import { fileURLToPath } from "node:url";
import { underLoadMs } from "@tackle/test-support";

export type Ask =
  | { readonly n: number; readonly op: "create"; readonly id: string; readonly clips: number }
  | { readonly n: number; readonly op: "read"; readonly id: string }
  | { readonly n: number; readonly op: "commit"; readonly id: string; readonly marker: string };

export interface Answer {
  readonly n: number;
  /** create: true or false; read: the entities found (undefined: no document); commit: the push's status. */
  readonly value?: boolean | number | string | undefined;
  readonly error?: string;
  /** A create's: the most a 10 ms timer was late while its store held the claim (0 for other asks). */
  readonly lagMs: number;
}

export const token = "token-shared-file-0123456789";

const child = fileURLToPath(new URL("./shared-file-creates-child.ts", import.meta.url));

/** What came of an ask: the child's answer, or `killed` when it was killed first. */
export type Outcome = Answer | "killed";

type AskOf<A> = A extends Ask ? Omit<A, "n"> : never;

/** A store process on the file; `ask` answers once the child does, or `killed` once it is killed. */
export class StoreProcess {
  private readonly pending = new Map<number, (outcome: Outcome) => void>();
  private asked = 0;
  readonly name: string;
  private readonly process_: ChildProcess;
  private readonly exited: Promise<void>;
  private constructor(name: string, process_: ChildProcess, exited: Promise<void>) {
    this.name = name;
    this.process_ = process_;
    this.exited = exited;
    process_.on("message", (answer: Answer) => {
      this.pending.get(answer.n)?.(answer);
      this.pending.delete(answer.n);
    });
  }

  static async start(name: string, path: string, leaseMs: number): Promise<StoreProcess> {
    const process_ = spawn(process.execPath, ["--conditions=@tackle/source", child, path, String(leaseMs)], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const exited = new Promise<void>((resolve) => process_.once("exit", () => resolve()));
    const ready = new Promise<void>((resolve, reject) => {
      const deadline = setTimeout(() => reject(new Error(`${name} not ready in time`)), underLoadMs(60_000));
      process_.once("message", () => {
        clearTimeout(deadline);
        resolve();
      });
      process_.once("exit", (code, signal) => {
        clearTimeout(deadline);
        reject(new Error(`${name} exited before it was ready (${code ?? signal})`));
      });
    });
    const started = new StoreProcess(name, process_, exited);
    await ready;
    return started;
  }

  get alive(): boolean {
    return this.process_.exitCode === null && this.process_.signalCode === null;
  }

  ask(ask: AskOf<Ask>): Promise<Outcome> {
    if (!this.alive) return Promise.resolve("killed");
    const n = ++this.asked;
    return new Promise((resolve) => {
      this.pending.set(n, resolve);
      this.process_.send({ ...ask, n });
    });
  }

  /** SIGKILL; every ask still open answers `killed`. */
  async kill(): Promise<void> {
    if (this.alive) this.process_.kill("SIGKILL");
    await this.exited;
    for (const resolve of this.pending.values()) resolve("killed");
    this.pending.clear();
  }
}

/** Every table a create writes under its id. */
export const tables = [
  "docscript_documents",
  "docscript_snapshots",
  "docscript_projection",
  "docscript_rows",
  "docscript_members",
  "docscript_numbers",
  "docscript_containers",
  "docscript_counts",
  "docscript_plans",
  "docscript_updates",
] as const;

export type Held = Record<(typeof tables)[number], number>;

/** Reads the file as it is now (read only, beside the processes writing it). */
export function readFile<T>(path: string, read: (database: DatabaseSync) => T): T {
  const database = new DatabaseSync(path, { readOnly: true, timeout: 5_000 });
  try {
    return read(database);
  } finally {
    database.close();
  }
}

/** Rows of every table kept under `documentId`. */
export function heldOf(database: DatabaseSync, documentId: string): Held {
  return Object.fromEntries(
    tables.map((table) => {
      const row = database
        .prepare(`SELECT count(*) AS n FROM ${table} WHERE document_id = ?`)
        .get(documentId);
      return [table, Number((row as { n: number }).n)];
    }),
  ) as Held;
}

export interface Claim {
  readonly documentId: string;
  readonly leaseUntil: number;
  /** Rows written under it so far. */
  readonly rows: number;
}

/** The ids claimed and not created (no snapshot), with their leases. */
export function claimsOf(database: DatabaseSync): Claim[] {
  const found = database
    .prepare(
      `SELECT document_id, lease_until,
         (SELECT count(*) FROM docscript_rows r WHERE r.document_id = d.document_id) AS rows
       FROM docscript_documents d
       WHERE NOT EXISTS (SELECT 1 FROM docscript_snapshots s WHERE s.document_id = d.document_id)`,
    )
    .all() as { document_id: string; lease_until: number | null; rows: number }[];
  return found.map((row) => ({
    documentId: row.document_id,
    leaseUntil: Number(row.lease_until ?? 0),
    rows: Number(row.rows),
  }));
}

/** Waits until every claim of the file has lapsed (its lease past), by a deadline. */
export async function untilClaimsLapse(path: string, ids?: ReadonlySet<string>): Promise<void> {
  const deadline = Date.now() + underLoadMs(60_000);
  for (;;) {
    const held = readFile(path, claimsOf).filter((claim) => ids === undefined || ids.has(claim.documentId));
    const until = Math.max(0, ...held.map((claim) => claim.leaseUntil));
    if (Date.now() > until) return;
    if (Date.now() > deadline)
      throw new Error(`claims still held past their deadline: ${JSON.stringify(held)}`);
    await new Promise((resolve) => setTimeout(resolve, Math.min(200, until - Date.now() + 5)));
  }
}
