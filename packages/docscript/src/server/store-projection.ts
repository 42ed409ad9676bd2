/**
 * The document server's projection of an open document: only the rows its checks looked up, read
 * from the store's rows on demand, never the whole document. A check runs against what is held and
 * records each lookup the projection could not answer whole (an entity's claims, an endpoint's
 * relations, an identity's entities, …); the caller puts back what the check staged, `fill`s those
 * lookups from the store and runs the check again, until a run lacks nothing. A lookup once filled
 * stays whole: every row it could find is held, and the projection is kept in step with every update
 * to the document after.
 */
import { ENTITIES, RELATIONS } from "../document/layout.ts";
import { type Lookup, Projection } from "../document/projection.ts";
import type { DocumentStore, FoundMember, MemberQuery, RowRoot } from "./document-store.ts";

/** Ids per store query, and rows per page. */
const batch = 500;
const pageSize = 5000;

interface Missing {
  readonly lookup: Lookup;
  readonly id: string;
  readonly kind?: string | undefined;
}

export class StoreProjection extends Projection {
  /** Lookups answered whole (every stored row they could find is held), by key. */
  private readonly known = new Set<string>();
  private readonly missing = new Map<string, Missing>();
  /** Every row is held (something needed them all). */
  private whole = false;

  protected override need(lookup: Lookup, id: string, kind?: string): void {
    if (this.whole) return;
    const key = keyOf(lookup, id, kind);
    if (this.known.has(key)) return;
    // All of an entity's relations held: those of one kind are.
    if (lookup === "endpoint" && kind !== undefined && this.known.has(keyOf(lookup, id))) return;
    if (!this.missing.has(key)) this.missing.set(key, { lookup, id, kind });
  }

  /** Whether a check since the last `fill` looked up something not held: its answer may be wrong. */
  override get lacking(): boolean {
    return this.missing.size > 0;
  }

  /** Whether every row is held. */
  get holdsEverything(): boolean {
    return this.whole;
  }

  /**
   * Reads what the checks lacked from the store. The projection must hold exactly what the store's
   * rows hold (nothing staged), and the store's rows must be at the version the projection is at: the
   * caller checks the rows' seq after.
   */
  async fill(store: DocumentStore, documentId: string): Promise<void> {
    const wanted = [...this.missing.entries()];
    this.missing.clear();
    if (wanted.some(([, missing]) => missing.lookup === "whole")) {
      await this.fillWhole(store, documentId);
      return;
    }
    const of = (lookup: Lookup) =>
      wanted.filter(([, missing]) => missing.lookup === lookup).map(([, missing]) => missing.id);
    for (const [root, lookup] of [
      [ENTITIES, "row"],
      [RELATIONS, "relationRow"],
    ] as const) {
      const ids = of(lookup);
      for (let start = 0; start < ids.length; start += batch) {
        const chunk = ids.slice(start, start + batch);
        for (const row of await store.readRows(documentId, { root, ids: chunk, limit: chunk.length }))
          this.hold(row.root, row.rowId, row.json);
      }
    }
    for (const [type, lookup] of [
      ["entity", "entity"],
      ["relation", "relation"],
    ] as const) {
      const ids = of(lookup);
      for (let start = 0; start < ids.length; start += batch)
        await this.holdMembers(store, documentId, { type, ids: ids.slice(start, start + batch) });
    }
    // Relations by endpoint: one query per kind asked (or none) and batch of endpoints, not per entity.
    const endpoints = new Map<string | undefined, string[]>();
    for (const [, missing] of wanted)
      if (missing.lookup === "endpoint") {
        const ids = endpoints.get(missing.kind) ?? [];
        ids.push(missing.id);
        endpoints.set(missing.kind, ids);
      }
    for (const [kind, ids] of endpoints)
      for (let start = 0; start < ids.length; start += batch)
        await this.holdMembers(store, documentId, {
          type: "relation",
          endpoints: ids.slice(start, start + batch),
          ...(kind === undefined ? {} : { kinds: [kind] }),
        });
    for (const [, missing] of wanted) {
      if (missing.lookup === "endpoint") continue;
      if (missing.lookup === "variants")
        await this.holdMembers(store, documentId, { type: "entity", variantOf: missing.id });
      else if (missing.lookup === "identity")
        await this.holdMembers(store, documentId, { type: "entity", identity: missing.id });
    }
    for (const [key] of wanted) this.known.add(key);
  }

  private async fillWhole(store: DocumentStore, documentId: string): Promise<void> {
    for (const root of [ENTITIES, RELATIONS] as const) {
      let after: string | undefined;
      for (;;) {
        const page = await store.readRows(documentId, { root, after, limit: pageSize });
        for (const row of page) this.hold(root, row.rowId, row.json);
        if (page.length < pageSize) break;
        after = page.at(-1)?.rowId;
      }
    }
    this.whole = true;
    this.known.clear();
  }

  /** Every member the query finds, with its row, a page at a time. */
  private async holdMembers(
    store: DocumentStore,
    documentId: string,
    query: Omit<MemberQuery, "limit" | "after">,
  ): Promise<void> {
    let after: string | undefined;
    for (;;) {
      const page = await store.readMembers(documentId, { ...query, after, limit: pageSize });
      for (const member of page) this.holdMember(member);
      if (page.length < pageSize) return;
      // Pages walk member ids; rows past the page that claim its last id are read on their own.
      after = page.at(-1)?.id;
      if (after !== undefined)
        for (const member of await store.readMembers(documentId, { ...query, ids: [after], limit: pageSize }))
          this.holdMember(member);
    }
  }

  private holdMember(member: FoundMember): void {
    this.hold(member.root, member.rowId, member.json);
  }

  /** A stored row, unless held already (then it is the same: the projection is in step with the store). */
  private hold(root: RowRoot, rowId: string, json: unknown): void {
    if (this.holds(root, rowId)) return;
    if (root === ENTITIES) this.setRow(rowId, json);
    else this.setRelationRow(rowId, json);
  }
}

function keyOf(lookup: Lookup, id: string, kind?: string): string {
  return kind === undefined ? `${lookup}\u0000${id}` : `${lookup}\u0000${id}\u0000${kind}`;
}
