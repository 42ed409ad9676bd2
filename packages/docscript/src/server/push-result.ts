/** What a push ends as. */
import type { DocumentIssue } from "../schema/types.ts";
import type { ConflictReason } from "./push-checks.ts";

export type { ConflictReason };

export type PushResult =
  /** Stored; `version` is the document's new version. `duplicate`: it was stored before (the same bytes, or the same plan id), nothing was stored now. */
  | { readonly status: "committed"; readonly version: string; readonly duplicate?: boolean }
  /**
   * Some writes no longer apply as their author saw them (another client deleted what they write, won a
   * concurrent write, or the merge breaks a constraint): one reason each. `applied: false` (the default):
   * nothing was stored, `version` is the document's current one; with `applyRemaining`, `applied: true`:
   * stored, the rest of the update applies.
   */
  | {
      readonly status: "conflicted";
      readonly applied: boolean;
      readonly version: string;
      readonly reasons: readonly ConflictReason[];
      readonly issues: readonly DocumentIssue[];
      /** Why `applyRemaining` stored nothing: what remains cannot be applied alone and keep the document valid. */
      readonly refused?: string;
    }
  /** Refused; nothing changed. */
  | {
      readonly status: "rejected";
      readonly reasons: readonly string[];
      readonly issues: readonly DocumentIssue[];
    };
