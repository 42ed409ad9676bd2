/** Writes the server push tests share: an edit as one change's update, and captions made in a session. */
import type { LoroDoc } from "loro-crdt";
import { openDocument } from "../src/document/document-session.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";

/** Writes `edit` into `replica` as one change; the update it made. */
export function write(replica: LoroDoc, edit: (doc: LoroDoc) => void): Uint8Array {
  const before = replica.oplogVersion();
  edit(replica);
  replica.commit();
  return replica.export({ mode: "update", from: before });
}

/** An edit creating `count` captions whose text starts with `prefix`. */
export const captions = (count: number, prefix: string) => (doc: LoroDoc) => {
  const session = openDocument(doc, timelineSchema);
  for (let index = 0; index < count; index++)
    session.entities.create({ entityKind: "caption", payload: { text: `${prefix} ${index}` } });
};
