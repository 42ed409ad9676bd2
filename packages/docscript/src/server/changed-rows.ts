/** Which `entities` and `relations` rows a change touched, read off Loro's diff between two versions. */
import type { Frontiers, LoroDoc } from "loro-crdt";
import { ENTITIES, META, RELATIONS } from "../document/layout.ts";

export interface ChangedRows {
  readonly entities: Set<string>;
  readonly relations: Set<string>;
  /** Root containers outside the mapping: a push that writes one breaks the schema. */
  readonly foreignRoots: Set<string>;
}

export function changedRows(doc: LoroDoc, from: Frontiers, to: Frontiers): ChangedRows {
  const changes: ChangedRows = { entities: new Set(), relations: new Set(), foreignRoots: new Set() };
  for (const [containerId, diff] of doc.diff(from, to, false)) {
    const path = doc.getPathToContainer(containerId);
    const root = path?.[0];
    if (root !== ENTITIES && root !== RELATIONS) {
      if (root !== META) changes.foreignRoots.add(String(root ?? containerId));
      continue;
    }
    const target = root === ENTITIES ? changes.entities : changes.relations;
    if (path !== undefined && path.length >= 2) {
      target.add(String(path[1]));
    } else if (diff.type === "map") {
      for (const key of Object.keys(diff.updated)) target.add(key);
    } else {
      changes.foreignRoots.add(`${String(root)} (not a map)`);
    }
  }
  return changes;
}
