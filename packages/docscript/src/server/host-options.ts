/** How a document host is made, and what it answers of credentials and plans. */
import { createHash } from "node:crypto";
import type { Logger } from "@tackle/core";
import type { Schema } from "../schema/define-schema.ts";
import type { DocumentStore } from "./document-store.ts";

export interface DocumentHostOptions {
  readonly store: DocumentStore;
  readonly schema: Schema;
  /** Compact the log into a snapshot after this many updates. Default 100. */
  readonly compactEvery?: number;
  /** ...or once the updates after the snapshot hold this many bytes. Default 1 MiB. */
  readonly compactLogBytes?: number;
  /** ...or once the oldest update after the snapshot is this old (checked on each push). Default 10 min. */
  readonly compactAgeMs?: number;
  /** Documents kept open in memory. Default 64. */
  readonly maxOpenDocuments?: number;
  /**
   * A stored push of at least this many atoms, and at least one in 64 of the document's history, makes
   * its checked fork the live document instead of being imported again (ADR 0496). Default 1,024; 0
   * makes every push's fork the live document.
   */
  readonly forkTakesOverAtoms?: number;
  readonly logger?: Logger;
}

/** What the server knows of a plan id. */
export type PlanState =
  | { readonly state: "applied"; readonly version: string }
  | { readonly state: "unknown"; readonly version: string };

export type Authorization = "ok" | "missing" | "forbidden" | "not_found";

export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}
