/** The one tool's input: an `op` and what that op needs. */
import { z } from "zod";

export const toolInputSchema = z.object({
  op: z.enum(["snapshot", "run-edit-script", "commit-plan"]).describe("What to do"),
  doc_id: z.string().min(1).max(200).describe("The document"),
  script: z.string().min(1).max(200_000).optional().describe("run-edit-script: the edit script (JavaScript)"),
  timeout_ms: z
    .number()
    .int()
    .min(1)
    .max(300_000)
    .optional()
    .describe("run-edit-script: limit counted from the script's start"),
  auto_commit: z.boolean().optional().describe("run-edit-script: publish the plan at once"),
  plan_id: z.string().min(1).max(200).optional().describe("commit-plan: the plan run-edit-script returned"),
});

export type ToolInput = z.infer<typeof toolInputSchema>;
