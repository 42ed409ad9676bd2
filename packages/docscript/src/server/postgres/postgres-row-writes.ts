/**
 * The PostgreSQL store's writes of a document's rows: each row with the entities and relations it
 * projects to, their number fields (the window index, migration 7), its maps (the container index,
 * migration 12) and the counts per kind, moved by what left and what landed — a few statements however
 * many rows (arrays or JSON texts as parameters), inside the caller's transaction.
 */
import { postgresDialect as sql } from "@tackle/storage";
import { postgresTransaction } from "@tackle/storage/postgres";
import type pg from "pg";
import { type RowChange, type RowMember, type RowRoot, rowColumns } from "../document-store.ts";
import { movedNumbers, sameButNumbers } from "../member-changes.ts";
import { numberEntries } from "../member-record.ts";
import { writeContainers } from "./postgres-container-index.ts";

/** Rows (and members) per statement, so one statement's parameters stay small at a million rows. */
const chunkSize = 5000;

export async function writeRows(
  client: pg.PoolClient,
  documentId: string,
  changes: readonly RowChange[],
  version: number,
): Promise<void> {
  await writeContainers(client, documentId, changes);
  // A row that keeps its members but for their numbers (a write of fields) keeps their index entries
  // and counts: only its moved numbers and its payload are written (ADR 0496).
  const keepingMembers: { change: RowChange; moved: [string, string, number | null][] }[] = [];
  const rows: RowChange[] = [];
  for (const change of changes) {
    const moved = sameButNumbers(change) ? movedNumbers(change) : undefined;
    if (moved === undefined) rows.push(change);
    else keepingMembers.push({ change, moved });
  }
  rows.push(...(await writeKeptRows(client, documentId, keepingMembers, version)));
  // The counts per kind move by what each row projected to before and what lands now.
  const deltas = new Map<string, number>();
  const count = (found: { type: string; kind: string }[], by: number) => {
    for (const member of found) {
      const key = JSON.stringify([member.type, member.kind]);
      deltas.set(key, (deltas.get(key) ?? 0) + by);
    }
  };
  for (const root of ["entities", "relations"] as const) {
    const ids = rows.filter((change) => change.root === root).map((change) => change.rowId);
    if (ids.length === 0) continue;
    const gone = await client.query<{ type: string; kind: string }>(
      `DELETE FROM docscript_members WHERE document_id = $1 AND root = $2 AND ${sql.anyOf("row_id", 3)} RETURNING type, kind`,
      [documentId, root, sql.list(ids)],
    );
    count(gone.rows, -1);
    await client.query(
      `DELETE FROM docscript_numbers WHERE document_id = $1 AND root = $2 AND ${sql.anyOf("row_id", 3)}`,
      [documentId, root, sql.list(ids)],
    );
  }
  count(await insertMembers(client, documentId, rows), 1);
  await moveCounts(client, documentId, deltas);
  const deleted = rows.filter((change) => change.json === undefined);
  const kept = rows
    .filter((change) => change.json !== undefined)
    .map((change) => ({ change, ...rowColumns(change) }));
  for (const root of ["entities", "relations"] as const) {
    const ids = deleted.filter((change) => change.root === root).map((change) => change.rowId);
    if (ids.length > 0)
      await client.query(
        `DELETE FROM docscript_rows WHERE document_id = $1 AND root = $2 AND ${sql.anyOf("row_id", 3)}`,
        [documentId, root, sql.list(ids)],
      );
  }
  for (let start = 0; start < kept.length; start += chunkSize) {
    const chunk = kept.slice(start, start + chunkSize);
    await client.query(
      `INSERT INTO docscript_rows (document_id, root, row_id, kind, payload, endpoint0, endpoint1, version)
       SELECT $1, * , $8 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
       ON CONFLICT (document_id, root, row_id) DO UPDATE SET kind = excluded.kind, payload = excluded.payload,
         endpoint0 = excluded.endpoint0, endpoint1 = excluded.endpoint1, version = excluded.version`,
      [
        documentId,
        chunk.map((row) => row.change.root),
        chunk.map((row) => row.change.rowId),
        chunk.map((row) => row.kind),
        chunk.map((row) => row.payload),
        chunk.map((row) => row.endpoint0),
        chunk.map((row) => row.endpoint1),
        version,
      ],
    );
  }
}

/** Rows kept from which their statements are made to probe the indexes (a few rows are, unasked). */
export const probeFrom = 100;

/**
 * Rows that keep their members: their moved numbers updated in place and their payloads written, one
 * statement a chunk. Answers those whose row the store did not hold: they are written whole.
 */
async function writeKeptRows(
  client: pg.PoolClient,
  documentId: string,
  kept: readonly { change: RowChange; moved: [string, string, number | null][] }[],
  version: number,
): Promise<RowChange[]> {
  // Each row and number probed in its index: left to itself, the planner hashed every number and row
  // of the document for each chunk (~0.1 s a statement at 100k entities, 0.2 s of a chunk's 0.3 s).
  // Local to the transaction, and put back below (an error aborts the transaction, and the setting).
  const probed = kept.length >= probeFrom;
  if (probed) await client.query("SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off");
  // One statement a chunk, its parameters one JSON text each (made natively: pg's text arrays took
  // ~2x the CPU), the next chunk's made while the server runs this one's.
  const updates: { chunk: typeof kept; answer: Promise<pg.QueryResult<{ r: string; i: string }>> }[] = [];
  let running: Promise<unknown> = Promise.resolve();
  for (let start = 0; start < kept.length; start += chunkSize) {
    const chunk = kept.slice(start, start + chunkSize);
    const numbers: { r: string; i: string; m: string; f: string; v: number | null }[] = [];
    for (const { change, moved } of chunk)
      for (const [member, field, value] of moved)
        numbers.push({ r: change.root, i: change.rowId, m: member, f: field, v: value });
    const rows = chunk.map(({ change }) => ({
      r: change.root,
      i: change.rowId,
      p: rowColumns(change).payload,
    }));
    const parameters = [documentId, JSON.stringify(numbers), JSON.stringify(rows), version];
    await running;
    // The payload and version alone: the row's kind and endpoints stand, and so do their index entries.
    const answer = client.query<{ r: string; i: string }>(
      `WITH moved AS (
         UPDATE docscript_numbers n SET value = u.v
           FROM json_to_recordset($2::json) AS u(r text, i text, m text, f text, v float8)
           WHERE n.document_id = $1 AND n.root = u.r AND n.row_id = u.i AND n.member_id = u.m
             AND n.field = u.f)
       UPDATE docscript_rows AS t SET payload = u.p, version = $4
         FROM json_to_recordset($3::json) AS u(r text, i text, p text)
         WHERE t.document_id = $1 AND t.root = u.r AND t.row_id = u.i
         RETURNING t.root AS r, t.row_id AS i`,
      parameters,
    );
    // Observed now, thrown where it is awaited (the next round, or below).
    answer.catch(() => undefined);
    running = answer;
    updates.push({ chunk, answer });
  }
  await running;
  const missing: RowChange[] = [];
  for (const { chunk, answer } of updates) {
    const updated = await answer;
    if (updated.rows.length === chunk.length) continue;
    const found = new Set(updated.rows.map((row) => `${row.r}\u0000${row.i}`));
    for (const { change } of chunk)
      if (!found.has(`${change.root}\u0000${change.rowId}`)) missing.push(change);
  }
  if (probed)
    await client.query("SET LOCAL enable_hashjoin TO DEFAULT; SET LOCAL enable_mergejoin TO DEFAULT");
  return missing;
}

/** Inserts the rows' members (a row naming one twice keeps its first) and the numbers of those that land. */
async function insertMembers(
  client: pg.PoolClient,
  documentId: string,
  rows: readonly RowChange[],
): Promise<{ type: string; kind: string }[]> {
  const members = rows.flatMap((change) =>
    (change.members ?? []).map((member) => ({ member, root: change.root, rowId: change.rowId })),
  );
  const landed: { type: string; kind: string }[] = [];
  for (let start = 0; start < members.length; start += chunkSize) {
    const chunk = members.slice(start, start + chunkSize);
    const column = (pick: (entry: (typeof chunk)[number]) => string | undefined) =>
      chunk.map((entry) => pick(entry) ?? null);
    const inserted = await client.query<{
      type: string;
      kind: string;
      member_id: string;
      root: string;
      row_id: string;
    }>(
      `INSERT INTO docscript_members
         (document_id, type, member_id, kind, root, row_id, endpoint0, endpoint1, variant_of, identity)
       SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
         $8::text[], $9::text[], $10::text[])
       ON CONFLICT DO NOTHING RETURNING type, kind, member_id, root, row_id`,
      [
        documentId,
        column((entry) => entry.member.type),
        column((entry) => entry.member.id),
        column((entry) => entry.member.kind),
        column((entry) => entry.root),
        column((entry) => entry.rowId),
        column((entry) => entry.member.endpoint0),
        column((entry) => entry.member.endpoint1),
        column((entry) => entry.member.variantOf),
        column((entry) => entry.member.identity),
      ],
    );
    landed.push(...inserted.rows);
    // Numbers only of members that landed: the first of an id a row names twice.
    const kept = new Set(
      inserted.rows.map((row) => `${row.type}\u0000${row.member_id}\u0000${row.root}\u0000${row.row_id}`),
    );
    const numbers = chunk.flatMap((entry) => {
      const key = `${entry.member.type}\u0000${entry.member.id}\u0000${entry.root}\u0000${entry.rowId}`;
      if (!kept.delete(key)) return [];
      return numberEntries([entry.member]).map((number) => ({
        ...number,
        root: entry.root,
        rowId: entry.rowId,
      }));
    });
    await insertNumbers(client, documentId, numbers);
  }
  return landed;
}

async function insertNumbers(
  client: pg.PoolClient,
  documentId: string,
  numbers: readonly {
    memberId: string;
    kind: string;
    field: string;
    value: number | null;
    root: string;
    rowId: string;
  }[],
): Promise<void> {
  for (let start = 0; start < numbers.length; start += chunkSize) {
    const chunk = numbers.slice(start, start + chunkSize);
    await client.query(
      `INSERT INTO docscript_numbers (document_id, kind, field, value, member_id, root, row_id)
       SELECT $1, * FROM unnest($2::text[], $3::text[], $4::float8[], $5::text[], $6::text[], $7::text[])`,
      [
        documentId,
        chunk.map((entry) => entry.kind),
        chunk.map((entry) => entry.field),
        chunk.map((entry) => entry.value),
        chunk.map((entry) => entry.memberId),
        chunk.map((entry) => entry.root),
        chunk.map((entry) => entry.rowId),
      ],
    );
  }
}

async function moveCounts(
  client: pg.PoolClient,
  documentId: string,
  deltas: Map<string, number>,
): Promise<void> {
  const moved = [...deltas]
    .filter(([, by]) => by !== 0)
    .map(([key, by]) => [...(JSON.parse(key) as [string, string]), by] as const);
  if (moved.length === 0) return;
  await client.query(
    `INSERT INTO docscript_counts (document_id, type, kind, count)
     SELECT $1, * FROM unnest($2::text[], $3::text[], $4::bigint[])
     ON CONFLICT (document_id, type, kind) DO UPDATE SET count = docscript_counts.count + excluded.count`,
    [documentId, moved.map((m) => m[0]), moved.map((m) => m[1]), moved.map((m) => m[2])],
  );
  await client.query("DELETE FROM docscript_counts WHERE document_id = $1 AND count <= 0", [documentId]);
}

/** Deletes every row, member, number, map and count of the document. */
export async function clearRows(client: pg.PoolClient, documentId: string): Promise<void> {
  for (const table of [
    "docscript_rows",
    "docscript_members",
    "docscript_numbers",
    "docscript_containers",
    "docscript_counts",
  ])
    await client.query(`DELETE FROM ${table} WHERE document_id = $1`, [documentId]);
}

/**
 * Indexes the number fields of every stored row of a document stored before the index, a chunk of
 * rows per transaction; each chunk's rows are locked while it is indexed, so an append writing one
 * of them meanwhile waits and then writes its own numbers.
 */
export async function indexNumbers(
  pool: pg.Pool,
  documentId: string,
  numbersOf: (root: RowRoot, rowId: string, json: unknown) => readonly RowMember[],
): Promise<void> {
  let after: [string, string] = ["", ""];
  for (;;) {
    const done = await postgresTransaction(pool, async (client) => {
      const found = await client.query<{ root: RowRoot; row_id: string; payload: string }>(
        `SELECT root, row_id, payload FROM docscript_rows WHERE document_id = $1 AND (root, row_id) > ($2, $3)
         ORDER BY root, row_id LIMIT $4 FOR UPDATE`,
        [documentId, after[0], after[1], chunkSize],
      );
      const rows = found.rows;
      for (const root of ["entities", "relations"] as const) {
        const ids = rows.filter((row) => row.root === root).map((row) => row.row_id);
        if (ids.length > 0)
          await client.query(
            `DELETE FROM docscript_numbers WHERE document_id = $1 AND root = $2 AND ${sql.anyOf("row_id", 3)}`,
            [documentId, root, sql.list(ids)],
          );
      }
      const numbers = rows.flatMap((row) => {
        const seen = new Set<string>();
        return numberEntries(numbersOf(row.root, row.row_id, JSON.parse(row.payload))).flatMap((entry) => {
          const key = `${entry.memberId}\u0000${entry.field}`;
          if (seen.has(key)) return [];
          seen.add(key);
          return [{ ...entry, root: row.root, rowId: row.row_id }];
        });
      });
      await insertNumbers(client, documentId, numbers);
      const last = rows.at(-1);
      if (last !== undefined) after = [last.root, last.row_id];
      if (rows.length >= chunkSize) return false;
      await client.query("UPDATE docscript_projection SET numbers_indexed = true WHERE document_id = $1", [
        documentId,
      ]);
      return true;
    });
    if (done) return;
  }
}
