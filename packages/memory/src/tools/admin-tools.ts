/** `adminTools`: status, provenance chains, novelty, consolidation, import, access analytics, traces, jobs. */
import { defineTool } from "@tackle/core";
import { z } from "zod";
import {
  accessSummariesRequestSchema,
  accessTrendsRequestSchema,
  consolidateRequestSchema,
  importTranscriptsRequestSchema,
  listJobsQuerySchema,
  listTracesQuerySchema,
  noveltyScanRequestSchema,
} from "../schemas/admin.ts";
import { idSchema } from "../schemas/common.ts";
import { bindIdentity, byIdOptions } from "./bind-identity.ts";
import type { MemoryToolClient } from "./memory-tool-client.ts";
import { modelSchema } from "./model-schema.ts";
import { writeOptions } from "./write-options.ts";

const reads = { readOnlyHint: true, idempotentHint: true, openWorldHint: false } as const;
const jobs = { readOnlyHint: false, openWorldHint: false } as const;

export function adminTools(client: MemoryToolClient) {
  return [
    defineTool({
      name: "memory_status",
      description: "The service's health: version, store, ranking, models, this tenant's counts.",
      input: modelSchema(z.object({})),
      annotations: { title: "Status", ...reads },
      execute: (_input, context) => client.status({ signal: context.signal }),
    }),
    defineTool({
      name: "memory_chain_trace",
      description: "Where a memory came from (events, imports, documents, memories) and what it became.",
      input: modelSchema(z.object({ id: idSchema })),
      annotations: { title: "Chain trace", ...reads },
      execute: ({ id }, context) => client.chainTrace(id, byIdOptions(context)),
    }),
    defineTool({
      name: "memory_novelty_scan",
      description: "Which candidate statements are new; for known ones, the nearest memory.",
      input: modelSchema(noveltyScanRequestSchema),
      annotations: { title: "Novelty scan", ...reads },
      execute: (input, context) =>
        client.noveltyScan(bindIdentity(input, context), writeOptions("memory_novelty_scan", context)),
    }),
    defineTool({
      name: "memory_consolidate",
      description:
        "Start a job that merges near-duplicate memories and archives decayed ones; poll it with memory_get_job.",
      input: modelSchema(consolidateRequestSchema),
      annotations: { title: "Consolidate", ...jobs },
      execute: (input, context) =>
        client.consolidate(bindIdentity(input, context), writeOptions("memory_consolidate", context)),
    }),
    defineTool({
      name: "memory_import_conversations",
      description:
        "Start a job importing past conversations as events and mined memories; poll it with memory_get_job.",
      // API-shaped transcripts only: a model does not hold a data export, and a provider wants the
      // tool's input to be one object, not the union of every format's (ADR 0543).
      input: modelSchema(importTranscriptsRequestSchema),
      annotations: { title: "Import conversations", ...jobs },
      execute: (input, context) =>
        client.importConversations(
          bindIdentity(input, context),
          writeOptions("memory_import_conversations", context),
        ),
    }),
    defineTool({
      name: "memory_admin_access_trends",
      description: "How often memories were retrieved over time, by bucket.",
      input: modelSchema(accessTrendsRequestSchema),
      annotations: { title: "Access trends", ...reads },
      execute: (input, context) =>
        client.accessTrends(bindIdentity(input, context), { signal: context.signal }),
    }),
    defineTool({
      name: "memory_admin_access_summaries",
      description: "The most and least retrieved memories, with their access counts.",
      input: modelSchema(accessSummariesRequestSchema),
      annotations: { title: "Access summaries", ...reads },
      execute: (input, context) =>
        client.accessSummaries(bindIdentity(input, context), { signal: context.signal }),
    }),
    defineTool({
      name: "memory_admin_list_traces",
      description: "Recent retrieval traces: what was asked, how ranked, what came back.",
      input: modelSchema(listTracesQuerySchema),
      annotations: { title: "List traces", ...reads },
      execute: (input, context) =>
        client.listTraces(bindIdentity(input, context), { signal: context.signal }),
    }),
    defineTool({
      name: "memory_admin_get_trace",
      description: "One retrieval trace in full, with each result's score components.",
      input: modelSchema(z.object({ id: idSchema })),
      annotations: { title: "Get trace", ...reads },
      execute: ({ id }, context) => client.getTrace(id, byIdOptions(context)),
    }),
    defineTool({
      name: "memory_list_jobs",
      description:
        "Import, consolidation and novelty-scan jobs, newest first, optionally by type and status.",
      input: modelSchema(listJobsQuerySchema),
      annotations: { title: "List jobs", ...reads },
      execute: (input, context) => client.listJobs(bindIdentity(input, context), { signal: context.signal }),
    }),
    defineTool({
      name: "memory_get_job",
      description: "One job's status, progress and result.",
      input: modelSchema(z.object({ id: idSchema })),
      annotations: { title: "Get job", ...reads },
      execute: ({ id }, context) => client.getJob(id, byIdOptions(context)),
    }),
  ];
}
