/**
 * The host's run documents (ADR 0464, replacing the worker's cache of ADR 0450): per document, a run doc
 * and the projection of the version it stands for. The run doc is a fork of the host's replica in
 * Loro's detached editing mode: each run checks it out at its version and writes on its own fresh peer,
 * so its changes depend on that version alone, and the next checkout drops them again (Loro reverts the
 * run's ops; only the first revert of a run doc is slow, and it is paid when the doc is made). A run
 * opens its session on an overlay of the projection, so nothing a run writes reaches either. A newer
 * version of the replica is caught up by importing the updates since (into the run doc's history only)
 * and re-reading just the rows they touched from the replica.
 */
import { randomBytes } from "node:crypto";
import { type Frontiers, type LoroDoc, LoroMap, VersionVector } from "loro-crdt";
import { projectDocument, refreshRows, versionKey } from "../document/interpret.ts";
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import { demandOf, onDemandProjection } from "../document/on-demand-projection.ts";
import type { Projection } from "../document/projection.ts";
import { readyForRunDoc } from "../document/ready-for-imports.ts";
import { type LookUpRows, lookupRowSource } from "../document/row-source.ts";
import { sameVersion } from "../document/version.ts";
import type { Schema } from "../schema/define-schema.ts";
import { changedRows } from "../server/changed-rows.ts";
import type { RunDocument } from "./run-session.ts";

/**
 * Where a large document's rows come from (ADR 0466): the server's stored rows, read on demand, instead
 * of a projection of the whole replica. `wholeUpTo` bounds a read of every row.
 */
export interface ServerRows {
  readonly source: LookUpRows;
  readonly wholeUpTo: number;
}

/** How much the host keeps: documents (0 keeps none) and, over all of them, entities. */
export interface CacheLimits {
  readonly documents: number;
  readonly entities?: number;
}

/** A run's document, and the call that hands it back once the run has ended. */
export interface CheckedOutDocument {
  readonly document: RunDocument;
  release(): void;
}

export interface DocumentCache {
  /**
   * The document `key` at the replica's current version, keeping what `limits` allow; with `rows`, its
   * projection reads rows on demand from them (ADR 0466), else it is a projection of the whole replica.
   */
  checkout(
    key: string,
    replica: LoroDoc,
    schema: Schema,
    limits: CacheLimits,
    rows?: ServerRows,
  ): CheckedOutDocument;
  /** How the kept document `key` reads its rows: on demand, whole, or nothing kept. */
  readsOf(key: string): "on-demand" | "whole" | undefined;
  readonly size: number;
}

interface KeptDocument {
  readonly schema: Schema;
  /** The run doc: a fork of the replica in detached editing mode; its state is the last run's. */
  doc: LoroDoc;
  projection: Projection;
  /** Set when the projection reads rows on demand. */
  readonly rows: ServerRows | undefined;
  /** The replica's version the projection stands for, as `documentVersion` writes it, and as a vector and frontiers. */
  version: string;
  vector: VersionVector;
  frontiers: Frontiers;
  /** Ops runs have authored in the run doc (never exported again): past `maxRunOps` the doc is made anew. */
  runOps: number;
  /** A run is using it: another run at the same time gets a document of its own. */
  leased: boolean;
}

/** Rows a kept on-demand projection may hold before the next run starts it empty again. */
const maxHeldRows = 20_000;
/** Above this many rows touched by the updates, reading the whole document again is as cheap. */
const maxRowsRefreshed = 5_000;
/** Run ops a run doc may hold before it is made anew (they cost memory, never time). */
const maxRunOps = 200_000;

function freshPeer(): `${number}` {
  return String(randomBytes(8).readBigUInt64BE() & ((1n << 53n) - 1n)) as `${number}`;
}

/** Ops in `doc`'s history beyond `vector` (the runs' own). */
function opsBeyond(doc: LoroDoc, vector: VersionVector): number {
  let count = 0;
  for (const [peer, counter] of doc.oplogVersion().toJSON()) count += counter - (vector.get(peer) ?? 0);
  return count;
}

/**
 * A run doc for `replica`: a fork in detached editing mode. Its first revert of a run's ops is slow on a
 * large document (Loro builds its history index then), so it is made here with a throwaway write. So
 * is its first write to each root map a run writes (Loro decodes the map's state whole then: 0.3–0.8 s
 * of CPU at 100k entities, kept across checkouts): a throwaway key in each, so no run pays it, and the
 * memory it takes counts as the document's, not as a run's growth. And its first new containers (a
 * created row and its maps): Loro grows its memory by what the document's containers take then (36.7
 * MiB and 20–40 ms of CPU at 100k), once per doc; a few throwaway containers pay it here (ADR 0497).
 */
export function makeRunDoc(replica: LoroDoc): LoroDoc {
  readyForRunDoc(replica);
  const doc = replica.fork();
  doc.setDetachedEditing(true);
  const frontiers = replica.frontiers();
  doc.checkout(frontiers);
  doc.setPeerId(freshPeer());
  const made = doc.getMap("docscript-run-doc");
  made.set("made", true);
  for (const root of [ENTITIES, RELATIONS]) doc.getMap(root).set("docscript-run-doc", true);
  doc.commit();
  doc.checkout(frontiers);
  // New containers written where a run writes them: at the base, beside the throwaway write above.
  for (const name of ["row", "relation"])
    made.setContainer(name, new LoroMap()).setContainer("fields", new LoroMap());
  doc.commit();
  doc.checkout(frontiers);
  return doc;
}

/** The projection a run doc's runs start from: the replica read whole, or rows read on demand. */
function projectionOf(replica: LoroDoc, schema: Schema, rows: ServerRows | undefined): Projection {
  return rows === undefined
    ? projectDocument(replica, schema)
    : onDemandProjection(schema, lookupRowSource(rows.source), documentVersion(replica), rows.wholeUpTo);
}

/** A document kept anew: a run doc made from the replica and the projection of its version. */
function read(replica: LoroDoc, schema: Schema, rows: ServerRows | undefined): KeptDocument {
  return {
    schema,
    doc: makeRunDoc(replica),
    projection: projectionOf(replica, schema, rows),
    rows,
    version: documentVersion(replica),
    vector: replica.oplogVersion(),
    frontiers: replica.frontiers(),
    runOps: 0,
    leased: false,
  };
}

/** Imports the replica's updates since the kept version and re-reads the rows they touched. */
function catchUp(kept: KeptDocument, replica: LoroDoc): void {
  const bytes = replica.export({ mode: "update", from: kept.vector });
  const frontiers = replica.frontiers();
  kept.doc.import(bytes);
  if (kept.rows !== undefined) {
    // Rows on demand: what the new version's runs look up is read again from the server (the rows
    // the updates changed are not needed: a diff of a large document is not made for nothing).
    kept.projection = projectionOf(replica, kept.schema, kept.rows);
  } else {
    const rows = changedRows(replica, kept.frontiers, frontiers);
    if (rows.foreignRoots.size > 0 || rows.entities.size + rows.relations.size > maxRowsRefreshed)
      kept.projection = projectDocument(replica, kept.schema);
    else refreshRows(kept.projection, replica, rows);
  }
  kept.version = documentVersion(replica);
  kept.vector = replica.oplogVersion();
  kept.frontiers = frontiers;
}

export function createDocumentCache(): DocumentCache {
  const entries = new Map<string, KeptDocument>();

  const keptEntities = () => {
    let total = 0;
    for (const entry of entries.values())
      total += entry.rows === undefined ? entry.projection.entityCount : 0;
    return total;
  };

  return {
    readsOf(key) {
      const kept = entries.get(key);
      return kept === undefined ? undefined : kept.rows === undefined ? "whole" : "on-demand";
    },
    checkout(key, replica, schema, limits, rows) {
      const version = documentVersion(replica);
      const warnings: string[] = [];
      const kept = entries.get(key);
      if (kept?.leased === true) {
        // Another run is using it: this one gets a fork of its own (its projection too, unless the
        // kept one is at this version: the other run only reads it).
        const base = sameVersion(kept.version, version)
          ? kept.projection
          : projectionOf(replica, schema, rows);
        return { document: { doc: replica.fork(), base, source: "snapshot" }, release() {} };
      }
      let entry: KeptDocument | undefined;
      let source: RunDocument["source"] = "snapshot";
      if (
        kept !== undefined &&
        kept.schema === schema &&
        kept.runOps <= maxRunOps &&
        (kept.rows === undefined) === (rows === undefined)
      ) {
        // An on-demand projection that has grown is started empty again (rows are read on demand).
        if (kept.rows !== undefined && kept.projection.rowCount > maxHeldRows)
          kept.projection = projectionOf(replica, schema, kept.rows);
        if (sameVersion(kept.version, version)) {
          entry = kept;
          source = "cached";
        } else if (holdsVector(replica, kept.vector)) {
          try {
            catchUp(kept, replica);
            entry = kept;
            source = "updated";
          } catch (error) {
            warnings.push(
              `the updates since the kept version did not apply (${(error as Error).message}); read the document whole`,
            );
          }
        }
      }
      entries.delete(key);
      entry ??= read(replica, schema, rows);
      // Drops the last run's ops from the run doc's state: it reads as the replica's version again.
      entry.doc.checkout(entry.frontiers);
      entry.projection.readAt = versionKey(entry.doc);
      const before = entry.doc.oplogVersion();
      const reported = warnings.length === 0 ? {} : { warnings };
      const maxEntities = limits.entities ?? Number.POSITIVE_INFINITY;
      const keep =
        limits.documents > 0 && (entry.rows !== undefined || entry.projection.entityCount <= maxEntities);
      if (!keep) {
        if (limits.documents <= 0) entries.clear();
        return { document: { doc: entry.doc, base: entry.projection, source, ...reported }, release() {} };
      }
      entries.set(key, entry);
      // The least recently used leave first; the document just read is the last to go.
      for (const oldest of entries.keys()) {
        if (entries.size <= limits.documents && keptEntities() <= maxEntities) break;
        entries.delete(oldest);
      }
      entry.leased = true;
      const leased = entry;
      return {
        document: { doc: entry.doc, base: entry.projection, source, ...reported },
        release() {
          leased.leased = false;
          leased.runOps += opsBeyond(leased.doc, before);
          // The run's overlay takes no more of the server's rows.
          const remote = demandOf(leased.projection);
          if (remote !== undefined)
            for (const holder of remote.holders)
              if (holder !== leased.projection) remote.holders.delete(holder);
        },
      };
    },
    get size() {
      return entries.size;
    },
  };
}

/** Whether `doc` holds every op of `vector`: updates since it can be exported. */
function holdsVector(doc: LoroDoc, vector: VersionVector): boolean {
  const order = vector.compare(doc.oplogVersion());
  return order !== undefined && order <= 0;
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
