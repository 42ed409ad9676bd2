/**
 * Whether a push wrote entities' fields alone, and only fields no invariant reads (ADR 0483, 0487):
 * then its check reaches those entities, not their neighbours (`fieldScope`), as a run's write of
 * fields alone does. Told from each touched row as the projection held it and as the push left it.
 */
import { invariantsRead } from "../document/check-document.ts";
import { EMBEDDED_ID, ROW_FIELDS, ROW_KIND, ROW_SLOTS } from "../document/layout.ts";
import type { Schema } from "../schema/define-schema.ts";
import { isPlainRecord } from "../schema/own-keys.ts";

type JsonRecord = Record<string, unknown>;

/**
 * A row's verdict, told once for the row as it was and as the change left it (both the very objects
 * compared): the entities whose fields it wrote, or undefined when it did more. A run's parts are told
 * a slice at a time while the run goes on (ADR 0508); its push asks again for every row it touched,
 * and a row whose two values are the ones told is not compared again.
 */
export interface FieldVerdict {
  readonly before: unknown;
  readonly after: unknown;
  readonly written: readonly string[] | undefined;
}

/**
 * The entities whose fields the change wrote, when every row it touched (all `entities` rows, both
 * before and after) differs only in its entities' field values and no invariant reads a field
 * written; undefined otherwise (a row made or deleted, a kind, variant, slot or relation changed, a
 * field an invariant reads written), when the change's whole reach is checked. `verdicts`: rows told
 * before, by row id, read and added to.
 */
export function unreadFieldWrites(
  schema: Schema,
  previous: ReadonlyMap<string, unknown>,
  next: ReadonlyMap<string, unknown>,
  verdicts?: Map<string, FieldVerdict>,
): string[] | undefined {
  const written = new Set<string>();
  for (const [rowId, after] of next) {
    const before = previous.get(rowId);
    const told = verdicts?.get(rowId);
    let these: readonly string[] | undefined;
    if (told !== undefined && told.before === before && told.after === after) these = told.written;
    else {
      these = rowFieldWrites(schema, rowId, before, after);
      verdicts?.set(rowId, { before, after, written: these });
    }
    if (these === undefined) return undefined;
    for (const entityId of these) written.add(entityId);
  }
  return previous.size === next.size ? [...written] : undefined;
}

/** The entities of one row whose fields alone the change wrote (none an invariant reads), or undefined. */
function rowFieldWrites(
  schema: Schema,
  rowId: string,
  before: unknown,
  after: unknown,
): string[] | undefined {
  const written = new Set<string>();
  if (!isPlainRecord(before) || !isPlainRecord(after)) return undefined;
  if (!sameButFields(schema, rowId, before, after, written)) return undefined;
  const slotsBefore = before[ROW_SLOTS];
  const slotsAfter = after[ROW_SLOTS];
  if (slotsBefore === undefined && slotsAfter === undefined) return [...written];
  if (!isPlainRecord(slotsBefore) || !isPlainRecord(slotsAfter)) return undefined;
  if (!sameKeys(slotsBefore, slotsAfter)) return undefined;
  for (const [slot, held] of Object.entries(slotsAfter)) {
    const was = slotsBefore[slot];
    // An embedded entity (a row of its own in its holder's slot): its fields may differ, with its id.
    if (isPlainRecord(was) && isPlainRecord(held) && ROW_FIELDS in held && ROW_FIELDS in was) {
      const embeddedId = held[EMBEDDED_ID];
      if (typeof embeddedId !== "string" || !sameButFields(schema, embeddedId, was, held, written))
        return undefined;
    } else if (!jsonEqual(was, held)) return undefined;
  }
  return [...written];
}

/**
 * Whether two reads of one entity's row differ in its fields' values only (its slots are compared by
 * the caller), each field written of a kind no invariant reads; the entity is added to `written`
 * when a field differs.
 */
function sameButFields(
  schema: Schema,
  entityId: string,
  before: JsonRecord,
  after: JsonRecord,
  written: Set<string>,
): boolean {
  if (!sameKeys(before, after)) return false;
  for (const key of Object.keys(after)) {
    if (key === ROW_FIELDS || key === ROW_SLOTS) continue;
    if (!jsonEqual(before[key], after[key])) return false;
  }
  const kind = after[ROW_KIND];
  const fieldsBefore = before[ROW_FIELDS];
  const fieldsAfter = after[ROW_FIELDS];
  if (typeof kind !== "string" || !isPlainRecord(fieldsBefore) || !isPlainRecord(fieldsAfter)) return false;
  for (const name of new Set([...Object.keys(fieldsBefore), ...Object.keys(fieldsAfter)])) {
    if (jsonEqual(fieldsBefore[name], fieldsAfter[name])) continue;
    if (invariantsRead(schema, kind, name)) return false;
    written.add(entityId);
  }
  return true;
}

function sameKeys(left: JsonRecord, right: JsonRecord): boolean {
  const keys = Object.keys(left);
  return keys.length === Object.keys(right).length && keys.every((key) => Object.hasOwn(right, key));
}

/** Two JSON values alike, whatever their objects' key order. */
function jsonEqual(left: unknown, right: unknown): boolean {
  if (left === right) return true;
  if (typeof left !== "object" || typeof right !== "object" || left === null || right === null) return false;
  if (Array.isArray(left) !== Array.isArray(right)) return false;
  if (Array.isArray(left)) {
    const other = right as unknown[];
    return left.length === other.length && left.every((value, index) => jsonEqual(value, other[index]));
  }
  const leftRecord = left as JsonRecord;
  const rightRecord = right as JsonRecord;
  return (
    sameKeys(leftRecord, rightRecord) &&
    Object.keys(leftRecord).every((key) => jsonEqual(leftRecord[key], rightRecord[key]))
  );
}
