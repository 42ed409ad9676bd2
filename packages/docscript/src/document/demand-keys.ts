/**
 * What a projection reading rows on demand (`rows-on-demand.ts`) has answered whole, and the keys of
 * the lookups and listing pages it records as lacking or read.
 */
import type { NumberRange } from "../server/document-store.ts";
import type { Lookup } from "./projection.ts";

/**
 * The lookups answered whole: ids by lookup (and kind), so the checks' many questions are answered
 * without building a key each (`keyOf` keys are taken apart once, when added).
 */
export class KnownLookups {
  private readonly ids = new Map<string, Set<string>>();

  has(key: string): boolean {
    const [lookup, id, kind] = key.split("\u0000");
    return this.hasId(lookup as Lookup, id ?? "", kind);
  }

  hasId(lookup: Lookup, id: string, kind?: string): boolean {
    return this.ids.get(kind === undefined ? lookup : `${lookup}\u0000${kind}`)?.has(id) ?? false;
  }

  add(key: string): void {
    const [lookup, id, kind] = key.split("\u0000");
    this.addId(lookup as Lookup, id ?? "", kind);
  }

  addId(lookup: Lookup, id: string, kind?: string): void {
    const group = kind === undefined ? (lookup as string) : `${lookup}\u0000${kind}`;
    let ids = this.ids.get(group);
    if (ids === undefined) {
      ids = new Set();
      this.ids.set(group, ids);
    }
    ids.add(id);
  }

  clear(): void {
    this.ids.clear();
  }
}

export function keyOf(lookup: Lookup, id: string, kind?: string): string {
  return kind === undefined ? `${lookup}\u0000${id}` : `${lookup}\u0000${id}\u0000${kind}`;
}

export function entityPageKey(kind: string | undefined, after: string | undefined, count: number): string {
  return `entityPage\u0000${kind ?? ""}\u0000${after ?? ""}\u0000${count}`;
}

export function windowPageKey(
  kind: string,
  window: NumberRange,
  after: string | undefined,
  count: number,
): string {
  return `windowPage\u0000${kind}\u0000${JSON.stringify([window.field, window.from ?? null, window.to ?? null])}\u0000${after ?? ""}\u0000${count}`;
}

export function orderedPageKey(kind: string, holder: string, from: "first" | "last", count: number): string {
  return `orderedPage\u0000${kind}\u0000${holder}\u0000${from}\u0000${count}`;
}

export function relationPageKey(kind: string | undefined): string {
  return `relationPage\u0000${kind ?? ""}`;
}

export function touchingPageKey(entityId: string, count: number): string {
  return `touchingPage\u0000${entityId}\u0000${count}`;
}
