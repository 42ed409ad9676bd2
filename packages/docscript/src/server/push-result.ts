/** What a push ends as. */
import type { DocumentIssue } from "../schema/types.ts";

export type PushResult =
  /** Stored; `version` is the document's new version. */
  | { readonly status: "committed"; readonly version: string }
  /** Stored, but the merged document no longer projects: take a fresh snapshot and decide. */
  | { readonly status: "conflicted"; readonly version: string; readonly issues: readonly DocumentIssue[] }
  /** Refused; nothing changed. */
  | {
      readonly status: "rejected";
      readonly reasons: readonly string[];
      readonly issues: readonly DocumentIssue[];
    };
