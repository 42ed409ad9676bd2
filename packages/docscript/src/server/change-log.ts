/**
 * A document's change log: one entry per stored push, written with the update it describes (so it
 * outlives compaction, which drops the update itself). Who sent it, the plan ids its changes carry and
 * how many entities and relations it created, changed and deleted, read off the rows the push check
 * already staged — recorded at push time, never recomputed.
 */
import type { Projection } from "../document/projection.ts";
import { readRelationRow, readRow, type StoredEntity, type StoredRelation } from "../document/row-shape.ts";

/** Items a change created, changed (their stored value differs) and deleted. */
export interface RowCounts {
  readonly created: number;
  readonly changed: number;
  readonly deleted: number;
}

/** What the server records of a push besides its bytes. */
export interface ChangeFacts {
  /** The credential the push came with: a host's, or the document's own token. */
  readonly credential: "host" | "document";
  /** The Loro peers that authored the update's changes (decimal strings). */
  readonly peers: readonly string[];
  /** The plan ids the update's changes carry (a committed edit-script plan). */
  readonly planIds: readonly string[];
  readonly entities: RowCounts;
  readonly relations: RowCounts;
}

/** One entry of a document's change log. */
export interface DocumentChange extends ChangeFacts {
  /** The update's position in the document's log (1, 2, …). */
  readonly seq: number;
  /** When the server stored it (ISO 8601). */
  readonly at: string;
  /** `conflicted`: stored with `apply_remaining`, some of its writes did not apply. */
  readonly status: "committed" | "conflicted";
  /** The end user the push was made for (the `docscript-user` header), when it named one. */
  readonly actor?: string;
}

/** A page of the change log, newest first; `nextCursor` reads the older entries. */
export interface ChangePage {
  readonly changes: readonly DocumentChange[];
  readonly nextCursor?: string;
}

/** Entries a page holds by default, and at most. */
export const defaultChangesLimit = 50;
export const maxChangesLimit = 200;

/** Created, changed and deleted among the items keyed by id: `before` and `after` hold each one's reading. */
function countItems(before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>): RowCounts {
  let created = 0;
  let changed = 0;
  let deleted = 0;
  for (const [id, text] of after) {
    const was = before.get(id);
    if (was === undefined) created++;
    else if (was !== text) changed++;
  }
  for (const id of before.keys()) if (!after.has(id)) deleted++;
  return { created, changed, deleted };
}

/**
 * The counts of a staged change, from the rows it touched only: `entityRows` and `relationRows` hold
 * them as they were (their JSON), `projection` as they are now. Entities embedded in a row and the
 * relations stored in its slots count as entities and relations of their own.
 */
export function stagedCounts(
  projection: Projection,
  entityRows: ReadonlyMap<string, unknown>,
  relationRows: ReadonlyMap<string, unknown>,
): Pick<ChangeFacts, "entities" | "relations"> {
  const entities = { before: new Map<string, string>(), after: new Map<string, string>() };
  const relations = { before: new Map<string, string>(), after: new Map<string, string>() };
  const add = (
    side: "before" | "after",
    record: { entities: readonly StoredEntity[]; relations: readonly StoredRelation[] },
  ) => {
    for (const entity of record.entities) entities[side].set(entity.entityId, JSON.stringify(entity));
    for (const relation of record.relations)
      relations[side].set(relation.relationId, JSON.stringify(relation));
  };
  for (const [rowId, json] of entityRows) {
    if (json !== undefined) add("before", readRow(rowId, json, projection.schema));
    const now = projection.rowJson(rowId);
    if (now !== undefined) add("after", readRow(rowId, now, projection.schema));
  }
  for (const [relationId, json] of relationRows) {
    if (json !== undefined)
      relations.before.set(relationId, JSON.stringify(readRelationRow(relationId, json)));
    const now = projection.relationJson(relationId);
    if (now !== undefined) relations.after.set(relationId, JSON.stringify(readRelationRow(relationId, now)));
  }
  return {
    entities: countItems(entities.before, entities.after),
    relations: countItems(relations.before, relations.after),
  };
}

/** The counts of a change that wrote the fields of `written` alone (its rows' members unchanged). */
export function fieldCounts(written: readonly string[]): Pick<ChangeFacts, "entities" | "relations"> {
  return {
    entities: { created: 0, changed: written.length, deleted: 0 },
    relations: { created: 0, changed: 0, deleted: 0 },
  };
}

/** A row of the change log table as either store reads it back. */
export interface ChangeRow {
  readonly seq: number | string;
  readonly created_at: string | Date;
  readonly status: string;
  readonly actor: string | null;
  readonly credential: string;
  readonly peers: string;
  readonly plan_ids: string;
  readonly entities_created: number | string;
  readonly entities_changed: number | string;
  readonly entities_deleted: number | string;
  readonly relations_created: number | string;
  readonly relations_changed: number | string;
  readonly relations_deleted: number | string;
}

export function changeOfRow(row: ChangeRow): DocumentChange {
  return {
    seq: Number(row.seq),
    at: row.created_at instanceof Date ? row.created_at.toISOString() : row.created_at,
    status: row.status === "conflicted" ? "conflicted" : "committed",
    ...(row.actor === null ? {} : { actor: row.actor }),
    credential: row.credential === "host" ? "host" : "document",
    peers: JSON.parse(row.peers) as string[],
    planIds: JSON.parse(row.plan_ids) as string[],
    entities: {
      created: Number(row.entities_created),
      changed: Number(row.entities_changed),
      deleted: Number(row.entities_deleted),
    },
    relations: {
      created: Number(row.relations_created),
      changed: Number(row.relations_changed),
      deleted: Number(row.relations_deleted),
    },
  };
}

/** The values of a change log row, in the stores' column order after document id, seq and status. */
export function changeValues(
  actor: string | undefined,
  facts: ChangeFacts,
): [string | null, string, string, string, number, number, number, number, number, number] {
  return [
    actor ?? null,
    facts.credential,
    JSON.stringify(facts.peers),
    JSON.stringify(facts.planIds),
    facts.entities.created,
    facts.entities.changed,
    facts.entities.deleted,
    facts.relations.created,
    facts.relations.changed,
    facts.relations.deleted,
  ];
}

/** A page cut from `limit + 1` rows read newest first: the extra row says there are older ones. */
export function pageOf(rows: readonly DocumentChange[], limit: number): ChangePage {
  const changes = rows.slice(0, limit);
  const last = changes.at(-1);
  return rows.length > limit && last !== undefined ? { changes, nextCursor: String(last.seq) } : { changes };
}
