/** `lifecycleTools`: one memory by its handle — read, update, delete, history, outcomes, feedback. */
import { defineTool } from "@tackle/core";
import { z } from "zod";
import { idSchema } from "../schemas/common.ts";
import {
  deleteMemoryQuerySchema,
  feedbackRequestSchema,
  procedureOutcomeRequestSchema,
  updateMemoryRequestSchema,
} from "../schemas/memory.ts";
import { byIdOptions } from "./bind-identity.ts";
import type { MemoryToolClient } from "./memory-tool-client.ts";
import { modelSchema } from "./model-schema.ts";
import { byIdWriteOptions } from "./write-options.ts";

const handle = { id: idSchema.describe("The memory's id, as search or add returned it") };

export function lifecycleTools(client: MemoryToolClient) {
  return [
    defineTool({
      name: "memory_lifecycle_get",
      description: "Read one memory: provenance, version, status, feedback and outcomes.",
      input: modelSchema(z.object(handle)),
      annotations: { title: "Get memory", readOnlyHint: true, idempotentHint: true, openWorldHint: false },
      execute: ({ id }, context) => client.getMemory(id, byIdOptions(context)),
    }),
    defineTool({
      name: "memory_lifecycle_update",
      description:
        "Change a memory's content, kind, metadata or importance, keeping the old version; expectedVersion refuses a concurrent change.",
      input: modelSchema(z.object({ ...handle, ...updateMemoryRequestSchema.shape })),
      annotations: { title: "Update memory", readOnlyHint: false, openWorldHint: false },
      execute: async ({ id, ...request }, context) => {
        return client.updateMemory(id, request, byIdWriteOptions("memory_lifecycle_update", context));
      },
    }),
    defineTool({
      name: "memory_lifecycle_delete",
      description: "Soft-delete a memory: it leaves retrieval, its history stays. Give a reason.",
      input: modelSchema(z.object({ ...handle, ...deleteMemoryQuerySchema.shape })),
      annotations: {
        title: "Delete memory",
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: true,
        openWorldHint: false,
      },
      execute: async ({ id, ...request }, context) => {
        return client.deleteMemory(
          id,
          request.reason === undefined ? {} : { reason: request.reason },
          byIdWriteOptions("memory_lifecycle_delete", context),
        );
      },
    }),
    defineTool({
      name: "memory_lifecycle_history",
      description: "A memory's versions: each create, update, merge and delete, with reasons.",
      input: modelSchema(z.object(handle)),
      annotations: {
        title: "Memory history",
        readOnlyHint: true,
        idempotentHint: true,
        openWorldHint: false,
      },
      execute: async ({ id }, context) => {
        return client.memoryHistory(id, byIdOptions(context));
      },
    }),
    defineTool({
      name: "memory_procedure_outcome",
      description: "Record whether following a procedure memory worked; outcomes weigh its future ranking.",
      input: modelSchema(z.object({ ...handle, ...procedureOutcomeRequestSchema.shape })),
      annotations: { title: "Procedure outcome", readOnlyHint: false, openWorldHint: false },
      execute: async ({ id, ...request }, context) => {
        return client.recordProcedureOutcome(
          id,
          request,
          byIdWriteOptions("memory_procedure_outcome", context),
        );
      },
    }),
    defineTool({
      name: "memory_feedback",
      description: "Mark a memory helpful or unhelpful; feedback weighs its future ranking.",
      input: modelSchema(z.object({ ...handle, ...feedbackRequestSchema.shape })),
      annotations: { title: "Memory feedback", readOnlyHint: false, openWorldHint: false },
      execute: async ({ id, ...request }, context) => {
        return client.recordFeedback(id, request, byIdWriteOptions("memory_feedback", context));
      },
    }),
  ];
}
