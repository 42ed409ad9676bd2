/**
 * What the member-store tests share: a document created in a store with its rows and issues from a
 * projection, and every member a query finds, read a page at a time.
 */
import { checkDocument } from "../src/document/check-document.ts";
import type { Projection } from "../src/document/projection.ts";
import type { DocumentStore, FoundMember, MemberQuery } from "../src/server/document-store.ts";
import { hashToken } from "../src/server/index.ts";
import { allRowChanges } from "../src/server/row-members.ts";

/** A member as the tests compare them: its id and the row it is in. */
export const memberKey = (member: FoundMember) => `${member.id}@${member.rowId}`;

/** Creates document `doc` in `store` from `snapshot`, its rows and issues from `projection`. */
export async function createMemberDocument(
  store: DocumentStore,
  snapshot: Uint8Array,
  projection: Projection,
): Promise<void> {
  await store.createDocument({
    documentId: "doc",
    tokenHash: hashToken("token-0123456789abcdef"),
    snapshot,
    rows: allRowChanges(projection),
    issues: checkDocument(projection),
  });
}

/** Every member of `doc` `query` finds, `limit` a page (small: the paging is under test too). */
export async function readAllMembers(
  store: DocumentStore,
  query: Omit<MemberQuery, "limit" | "after">,
  limit = 7,
): Promise<FoundMember[]> {
  const found: FoundMember[] = [];
  let afterId: string | undefined;
  for (;;) {
    const page = await store.readMembers("doc", { ...query, after: afterId, limit });
    found.push(...page);
    if (page.length < limit) return found;
    afterId = page.at(-1)?.id;
  }
}
