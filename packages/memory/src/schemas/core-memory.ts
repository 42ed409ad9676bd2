/** Core memory: small labelled blocks an agent edits itself, under character limits. */
import { z } from "zod";
import { memoryScopeShape } from "../scope/memory-scope.ts";
import { timestampSchema } from "./common.ts";

export const blockLabelSchema = z
  .string()
  .regex(/^[a-z][a-z0-9_]{0,63}$/, "lowercase letters, digits and _; starts with a letter");

export const coreMemoryBlockSchema = z.object({
  label: blockLabelSchema,
  value: z.string(),
  limit: z.number().int(),
  /** Characters still free under the limit. */
  remaining: z.number().int(),
  version: z.number().int(),
  updatedAt: timestampSchema,
});
export type CoreMemoryBlock = z.infer<typeof coreMemoryBlockSchema>;

export const coreMemoryEditSchema = z.discriminatedUnion("op", [
  z.object({ op: z.literal("append"), label: blockLabelSchema, text: z.string().min(1).max(20000) }),
  z.object({
    op: z.literal("replace"),
    label: blockLabelSchema,
    /** Must occur exactly once in the block. */
    oldText: z.string().min(1).max(20000),
    newText: z.string().max(20000),
  }),
  z.object({ op: z.literal("rewrite"), label: blockLabelSchema, text: z.string().max(20000) }),
  z.object({
    op: z.literal("create"),
    label: blockLabelSchema,
    limit: z.number().int().min(1).max(20000),
    text: z.string().max(20000).default(""),
  }),
]);
export type CoreMemoryEdit = z.input<typeof coreMemoryEditSchema>;

export const selfEditRequestSchema = z.object({
  ...memoryScopeShape,
  /** Applied in order, all or nothing. An empty list reads the blocks. */
  edits: z.array(coreMemoryEditSchema).max(50).default([]),
});
export type SelfEditRequest = z.input<typeof selfEditRequestSchema>;

export const selfEditResponseSchema = z.object({ blocks: z.array(coreMemoryBlockSchema) });
export type SelfEditResponse = z.infer<typeof selfEditResponseSchema>;

/** Blocks every scope starts with (Letta's persona/human pair). */
export const DEFAULT_CORE_BLOCKS = [
  { label: "persona", limit: 2000 },
  { label: "human", limit: 2000 },
] as const;
