/**
 * The docscript module for `tackle serve`: an embedded document server on loopback holding a sample
 * timeline document, and the edit-script tool on it, so a person can snapshot, script and commit from
 * the console. Bundle contract: a default-export function of `{ module, node, env, logger }` returning
 * `{ tools, close }`.
 */
import { randomBytes } from "node:crypto";
import { defineTool, type Logger, silentLogger } from "@tackle/core";
import { z } from "zod";
import { createDocumentClient } from "../client/create-document-client.ts";
import { serveDocuments } from "../server/serve-documents.ts";
import { createSqliteDocumentStore } from "../server/sqlite-document-store.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { createDocScriptTool } from "../tool/create-doc-script-tool.ts";
import { sampleTimelineSnapshot } from "./sample-timeline.ts";

export interface DocScriptBundleContext {
  readonly module: string;
  readonly node: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly logger?: Logger;
}

/** The sample document's id. */
export const sampleDocumentId = "sample-timeline";

export default async function docscriptBundle(context: DocScriptBundleContext) {
  const logger = context.logger ?? silentLogger;
  const adminToken = randomBytes(24).toString("base64url");
  const documentToken = randomBytes(24).toString("base64url");
  // The tool's own credential: a host's, so it may record stored-file facts (host-only fields).
  const hostToken = randomBytes(24).toString("base64url");
  // DOCSCRIPT_DATABASE keeps documents across restarts; by default they live in memory.
  const path = context.env.DOCSCRIPT_DATABASE ?? ":memory:";
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path }),
    schema: timelineSchema,
    adminToken,
    hostTokens: [hostToken],
    hostname: "127.0.0.1",
    logger,
  });
  try {
    const client = createDocumentClient({ origin: server.url, token: documentToken });
    await client.createDocument(sampleDocumentId, {
      adminToken,
      token: documentToken,
      snapshot: sampleTimelineSnapshot(),
    });
  } catch (error) {
    await server.close();
    throw error;
  }
  const docscript = createDocScriptTool({
    httpOrigin: server.url,
    authToken: hostToken,
    userId: `${context.module}@${context.node}`,
    logger,
  });
  logger.info("docscript: embedded document server", { url: server.url, document: sampleDocumentId });

  // The tool itself, renamed for the module: its failures reach a tool set (and MCP) as errors.
  const edit = defineTool({
    name: "edit",
    description: `${docscript.description} The sample document is "${sampleDocumentId}". Read the prompt from the context tool first.`,
    input: docscript.input,
    source: "@tackle/docscript module",
    execute: docscript.execute,
  });
  const contextTool = defineTool({
    name: "context",
    description:
      "The prompt for editing a document with the edit tool: workflow, rules, the script contract, worked scripts, and whether the document changed since the last call with the same context_id.",
    input: z.object({
      doc_id: z.string().min(1).default(sampleDocumentId).describe("The document"),
      context_id: z
        .string()
        .min(1)
        .default("console")
        .describe("Your conversation, to tell you what changed"),
    }),
    annotations: { readOnlyHint: true },
    source: "@tackle/docscript module",
    execute: (input) => docscript.getModelContext(input),
  });
  return {
    tools: [edit, contextTool],
    async close() {
      await docscript.close();
      await server.close();
    },
  };
}
