/**
 * A script session over a projection that may read rows on demand, for tests: each call is asked
 * again, after the projection fills what it lacked, until it lacks nothing (what a run's host does).
 */
import type { LoroDoc } from "loro-crdt";
import { openDocument } from "../src/document/document-session.ts";
import { demandOf } from "../src/document/on-demand-projection.ts";
import { type Projection, RowsNeeded } from "../src/document/projection.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";

/** A timeline session writing into `doc` over `base`; `call(work, id)` gives created entities `id`. */
export function sessionOver(doc: LoroDoc, base: Projection) {
  let nextId = "";
  const session = openDocument(doc, timelineSchema, {
    role: "script",
    projection: base,
    createId: () => nextId,
  });
  const demand = demandOf(base);
  const call = async <T>(work: () => T, id = ""): Promise<T> => {
    for (;;) {
      nextId = id;
      try {
        const value = work();
        if (demand === undefined || !demand.lacking) return value;
      } catch (error) {
        if (!(error instanceof RowsNeeded) && !demand?.lacking) throw error;
      }
      await demand?.fill();
    }
  };
  return { session, call };
}
