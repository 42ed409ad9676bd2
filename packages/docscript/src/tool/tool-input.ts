/** The one tool's input: an `op` and what that op needs. */
import { z } from "zod";

const ids = z.array(z.string().min(1).max(200)).min(1).max(200);

export const toolInputSchema = z.object({
  op: z
    .enum(["snapshot", "run-edit-script", "commit-plan", "plan-diff", "revert-plan"])
    .describe("What to do"),
  doc_id: z.string().min(1).max(200).describe("The document"),
  script: z.string().min(1).max(200_000).optional().describe("run-edit-script: the edit script (JavaScript)"),
  timeout_ms: z
    .number()
    .int()
    .min(1)
    .max(300_000)
    .optional()
    .describe(
      "run-edit-script: limit counted from the script's start; lowers the host's limit, never raises it",
    ),
  auto_commit: z.boolean().optional().describe("run-edit-script, revert-plan: publish the plan at once"),
  plan_id: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe(
      "commit-plan: the plan run-edit-script or revert-plan returned; plan-diff, revert-plan: a committed plan; run-edit-script: the plan commit-plan answered not_found for, run again under its id",
    ),
  apply_remaining: z
    .boolean()
    .optional()
    .describe(
      "commit-plan: after a conflicted answer, publish the plan's writes that still apply (the others are dropped)",
    ),
  cursor: z
    .string()
    .min(1)
    .max(2_000)
    .optional()
    .describe("snapshot: next_cursor of the previous page; send the same filters with it"),
  kinds: ids.optional().describe("snapshot: only entities of these kinds"),
  ids: ids.optional().describe("snapshot: only these entities"),
  related_to: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe("snapshot: only the entities related to this entity, and the relations touching it"),
  relation_kinds: ids.optional().describe("snapshot: only relations of these kinds"),
  include: z
    .enum(["entities", "relations", "both"])
    .optional()
    .describe("snapshot: list entities, relations or both (default)"),
  fields: z
    .array(z.string().min(1).max(100))
    .min(1)
    .max(50)
    .optional()
    .describe("snapshot: only these payload fields of each entity"),
  from_ms: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe("snapshot (timelines): clips and markers playing at or after this time"),
  to_ms: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe("snapshot (timelines): clips and markers starting at or before this time"),
});

export type ToolInput = z.infer<typeof toolInputSchema>;
