/**
 * A sandbox worker's last-read documents (ADR 0450): per document, a pristine Loro doc at one version and
 * the projection read from it. A run gets a fork of the doc and opens its session from a copy of the
 * projection, so nothing a run writes reaches the cache. A run at a newer version asks the host only
 * for the updates since the cached version and re-reads just the rows they touched.
 */
import { LoroDoc, VersionVector } from "loro-crdt";
import { projectDocument, refreshRows, versionKey } from "../document/interpret.ts";
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import type { Projection } from "../document/projection.ts";
import { sameVersion } from "../document/version.ts";
import type { Schema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";

/** What the host sends for a document: the updates since a version the worker holds, or a whole snapshot. */
export interface DocumentBytes {
  readonly kind: "updates" | "snapshot";
  readonly bytes: Uint8Array;
}

/** Asks the host for the document: `since` is the encoded version vector the worker already holds. */
export type LoadDocument = (since: Uint8Array | undefined) => Promise<DocumentBytes>;

export interface CheckedOutDocument {
  /** A fork at the requested version, the run's own: its writes never reach the cache. */
  readonly doc: LoroDoc;
  /**
   * The projection of that version, read-only: `openDocument` starts from a copy of it, and the run
   * reads it to tell what stood before the plan. Never write to it.
   */
  readonly base: Projection;
  /** How the document was obtained, for tests and metrics. */
  readonly source: "cached" | "updated" | "snapshot";
  /** What went wrong on the way and was recovered from (the host logs them). */
  readonly warnings?: readonly string[];
}

interface CachedDocument {
  readonly doc: LoroDoc;
  projection: Projection;
  version: string;
}

/** How much a worker keeps: documents (0 keeps none) and, over all of them, entities (a heap budget). */
export interface CacheLimits {
  readonly documents: number;
  readonly entities?: number;
}

/**
 * Entities a worker keeps for a heap ceiling: a quarter of the heap, at ~1.6 KB of heap per kept entity
 * (a 10k-entity timeline and its projection hold ~15.5 MB; Loro's own memory lies outside the heap).
 */
export function keptEntitiesFor(memoryLimitMb: number): number {
  return Math.floor((memoryLimitMb * 1024 * 1024) / 4 / 1600);
}

export interface DocumentCache {
  /** The document `key` at `version` (as `documentVersion` writes it), keeping what `limits` allow. */
  checkout(
    key: string,
    version: string,
    schema: Schema,
    limits: CacheLimits,
    load: LoadDocument,
  ): Promise<CheckedOutDocument>;
  readonly size: number;
}

/** Above this many rows touched by the updates, reading the whole document again is as cheap. */
const maxRowsRefreshed = 5_000;

export function createDocumentCache(): DocumentCache {
  const entries = new Map<string, CachedDocument>();

  const fromSnapshot = (bytes: Uint8Array, schema: Schema): CachedDocument => {
    const doc = new LoroDoc();
    doc.import(bytes);
    return { doc, projection: projectDocument(doc, schema), version: documentVersion(doc) };
  };

  /** Imports the updates and re-reads only the rows their ops touched, as the document's events name them. */
  const catchUp = (entry: CachedDocument, bytes: Uint8Array, schema: Schema): void => {
    const rows = { entities: new Set<string>(), relations: new Set<string>() };
    let foreign = false;
    const unsubscribe = entry.doc.subscribe((batch) => {
      for (const event of batch.events) {
        const [root, rowId] = event.path as readonly unknown[];
        const target = root === ENTITIES ? rows.entities : root === RELATIONS ? rows.relations : undefined;
        if (target === undefined) {
          foreign = true;
          continue;
        }
        if (typeof rowId === "string") {
          target.add(rowId);
        } else if (event.diff.type === "map") {
          for (const key of Object.keys(event.diff.updated)) target.add(key);
        } else {
          foreign = true;
        }
      }
    });
    try {
      entry.doc.import(bytes);
    } finally {
      unsubscribe();
    }
    if (foreign || rows.entities.size + rows.relations.size > maxRowsRefreshed) {
      entry.projection = projectDocument(entry.doc, schema);
    } else {
      refreshRows(entry.projection, entry.doc, rows);
      entry.projection.readAt = versionKey(entry.doc);
    }
    entry.version = documentVersion(entry.doc);
  };

  const load = async (
    key: string,
    version: string,
    schema: Schema,
    loadDocument: LoadDocument,
    warnings: string[],
  ): Promise<{ entry: CachedDocument; source: CheckedOutDocument["source"] }> => {
    const cached = entries.get(key);
    if (cached !== undefined && cached.projection.schema === schema) {
      if (sameVersion(cached.version, version)) return { entry: cached, source: "cached" };
      const answer = await loadDocument(cached.doc.oplogVersion().encode());
      if (answer.kind === "updates") {
        try {
          catchUp(cached, answer.bytes, schema);
        } catch (error) {
          // The kept entry may be half caught up: it is dropped and the document read whole below.
          warnings.push(
            `the updates since the kept version did not apply (${(error as Error).message}); read a snapshot`,
          );
        }
        if (warnings.length === 0 && sameVersion(cached.version, version))
          return { entry: cached, source: "updated" };
      } else {
        const entry = fromSnapshot(answer.bytes, schema);
        if (sameVersion(entry.version, version)) return { entry, source: "snapshot" };
      }
    }
    // Nothing cached, another schema, or the cached doc is not an ancestor of this version: read it whole.
    entries.delete(key);
    const answer = await loadDocument(undefined);
    if (answer.kind !== "snapshot")
      throw new DocScriptError("document_unavailable", "the host answered a snapshot request with updates");
    const entry = fromSnapshot(answer.bytes, schema);
    if (!sameVersion(entry.version, version)) {
      throw new DocScriptError(
        "document_unavailable",
        `the host sent the document at another version than the run's (${entry.version.slice(0, 40)}, not ${version.slice(0, 40)})`,
      );
    }
    return { entry, source: "snapshot" };
  };

  const keptEntities = () => {
    let total = 0;
    for (const entry of entries.values()) total += entry.projection.entityCount;
    return total;
  };

  return {
    async checkout(key, version, schema, limits, loadDocument) {
      const warnings: string[] = [];
      const { entry, source } = await load(key, version, schema, loadDocument, warnings);
      const reported = warnings.length === 0 ? {} : { warnings };
      entries.delete(key);
      const maxEntities = limits.entities ?? Number.POSITIVE_INFINITY;
      if (limits.documents <= 0 || entry.projection.entityCount > maxEntities) {
        // Not kept, so the run may write into the doc it was handed; the projection is copied on open.
        if (limits.documents <= 0) entries.clear();
        return { doc: entry.doc, base: entry.projection, source, ...reported };
      }
      entries.set(key, entry);
      // The least recently used leave first; the document just read is the last to go.
      for (const oldest of entries.keys()) {
        if (entries.size <= limits.documents && keptEntities() <= maxEntities) break;
        entries.delete(oldest);
      }
      return { doc: entry.doc.fork(), base: entry.projection, source, ...reported };
    },
    get size() {
      return entries.size;
    },
  };
}

/**
 * A document's version as one canonical string: its version vector's peers and counters in peer order
 * (an encoded vector lists peers in no fixed order, so equal versions may encode differently).
 */
export function documentVersion(doc: LoroDoc): string {
  return JSON.stringify(
    [...doc.oplogVersion().toJSON()]
      .filter(([, counter]) => counter > 0)
      .sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0)),
  );
}

/** Whether `since` (an encoded version vector) is contained in `doc`'s version: the doc can send updates from it. */
export function holdsVersion(doc: LoroDoc, since: Uint8Array): boolean {
  let vector: VersionVector;
  try {
    vector = VersionVector.decode(since);
  } catch {
    return false;
  }
  const order = vector.compare(doc.oplogVersion());
  return order !== undefined && order <= 0;
}
