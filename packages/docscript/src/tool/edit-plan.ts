/** A plan: one run's checked change to one document, kept in the process and referenced by `plan_id`. */
import type { UploadedText } from "./host-hooks.ts";
import type { PlanPreview } from "./plan-preview.ts";

export interface EditPlan {
  readonly planId: string;
  readonly docId: string;
  /** The Loro update the run produced on the version it read; a retry resends exactly these bytes. */
  readonly update: Uint8Array;
  /** The version the script read. */
  readonly baseVersion: string;
  readonly preview: PlanPreview;
  /** Keys of the media the plan created, for `loadGenerationFacts`. */
  readonly createdFileKeys: readonly string[];
  /** Texts `uploadText` stored for this plan: durable once it commits, discarded if it never does. */
  readonly uploads?: readonly UploadedText[];
}

/** How a commit ended. */
export type CommitOutcome =
  | {
      readonly status: "committed";
      readonly version: string;
      readonly warnings: readonly string[];
      /** The server had applied this plan already: nothing was applied now. */
      readonly duplicate?: boolean;
      /** The plan held no change (its preview says `unchanged`): nothing was published. */
      readonly unchanged?: true;
    }
  | {
      readonly status: "conflicted";
      readonly version: string;
      /** False: nothing of the plan was applied. True: applied without the writes `reasons` names. */
      readonly applied: boolean;
      /** One per write that no longer applies. */
      readonly reasons: readonly unknown[];
      readonly issues: readonly unknown[];
      /** Why `apply_remaining` applied nothing: what remains cannot keep the document valid alone. */
      readonly refused?: string;
    }
  | { readonly status: "unconfirmed"; readonly reason: string }
  | { readonly status: "rejected"; readonly reasons: readonly string[]; readonly issues: readonly unknown[] };
