/**
 * The docscript module for `tackle serve`: an embedded document server on loopback holding a sample
 * timeline document, the edit-script tool on it, so a person can snapshot, script and commit from
 * the console, and the document's change log as the server keeps it. Bundle contract: a default-export function of `{ module, node, env, logger }` returning
 * `{ tools, close }`.
 */
import { randomBytes } from "node:crypto";
import { defineTool, type Logger, silentLogger, ToolError } from "@tackle/core";
import { z } from "zod";
import { createDocumentClient } from "../client/create-document-client.ts";
import type { DocumentStore } from "../server/document-store.ts";
import { serveDocuments } from "../server/serve-documents.ts";
import { createSqliteDocumentStore } from "../server/sqlite-document-store.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { createDocScriptTool } from "../tool/create-doc-script-tool.ts";
import { notFound } from "../tool/document-access.ts";
import { sampleTimelineSnapshot } from "./sample-timeline.ts";

export interface DocScriptBundleContext {
  readonly module: string;
  readonly node: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly logger?: Logger;
}

/** The sample document's id. */
export const sampleDocumentId = "sample-timeline";

/**
 * The module's own settings (DOCSCRIPT_*, never other programs' secrets) from the process, under the
 * bundle's env: the runtime hands bundles an explicit environment without them.
 */
function settings(context: DocScriptBundleContext): Readonly<Record<string, string | undefined>> {
  const fromProcess = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => name.startsWith("DOCSCRIPT_")),
  );
  return { ...fromProcess, ...context.env };
}

export default async function docscriptBundle(context: DocScriptBundleContext) {
  const logger = context.logger ?? silentLogger;
  const env = settings(context);
  const adminToken = randomBytes(24).toString("base64url");
  // DOCSCRIPT_TOKEN and DOCSCRIPT_PORT let other clients (a script, another agent) open the sample
  // document on this server; by default its token is random and the port free.
  const documentToken = env.DOCSCRIPT_TOKEN ?? randomBytes(24).toString("base64url");
  if (documentToken.length < 16) throw new Error("DOCSCRIPT_TOKEN must be at least 16 characters");
  const port = env.DOCSCRIPT_PORT === undefined ? 0 : Number(env.DOCSCRIPT_PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new Error(`DOCSCRIPT_PORT must be a port number, not ${JSON.stringify(env.DOCSCRIPT_PORT)}`);
  // The tool's own credential: a host's, so it may record stored-file facts (host-only fields).
  const hostToken = randomBytes(24).toString("base64url");
  // DOCSCRIPT_DATABASE keeps documents across restarts (a SQLite file or a postgres:// URL); by
  // default they live in memory.
  const store = await openStore(env.DOCSCRIPT_DATABASE ?? ":memory:");
  const server = await serveDocuments({
    store,
    schema: timelineSchema,
    adminToken,
    hostTokens: [hostToken],
    hostname: "127.0.0.1",
    port,
    logger,
  });
  // The module's own reads (the change log) with the host credential: it opens every document.
  const client = createDocumentClient({ origin: server.url, token: hostToken });
  try {
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
    // The actor the change log shows: the module, and its mesh node when there is one.
    userId: context.node === "" ? context.module : `${context.module}@${context.node}`,
    // The host credential opens every document of the store: with a database shared with other
    // document servers (DOCSCRIPT_DATABASE) that is more than this module was handed, so its calls open
    // its own document only, and any other id answers as one that does not exist.
    documents: [sampleDocumentId],
    logger,
  });
  logger.info("docscript: embedded document server", { url: server.url, document: sampleDocumentId });

  // The change log reads through the module's own client: the same rule, the same answer.
  const ownDocument = (docId: string) => {
    if (docId !== sampleDocumentId) throw notFound(docId);
  };

  // The tool itself, renamed for the module: its failures reach a tool set (and MCP) as errors.
  const edit = defineTool({
    name: "edit",
    description: `${docscript.description} The sample document is "${sampleDocumentId}". Read the prompt from the context tool first.`,
    input: docscript.input,
    source: "@tackle/docscript module",
    execute: (input, toolContext) => docscript.execute(input, toolContext),
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
    execute: (input, toolContext) =>
      docscript.getModelContext(input, {
        callId: toolContext.callId,
        ...(toolContext.identity === undefined ? {} : { identity: toolContext.identity }),
      }),
  });
  const changes = defineTool({
    name: "changes",
    description:
      "A document's change log as the document server keeps it, newest first: each stored change's seq, time, who made it (user, credential, Loro peers), the plan ids it carries (a committed edit plan) and how many entities and relations it created, changed and deleted. Pass next_cursor back as cursor for older entries.",
    input: z.object({
      doc_id: z.string().min(1).default(sampleDocumentId).describe("The document"),
      limit: z.number().int().min(1).max(200).default(20).describe("Entries to return (at most 200)"),
      cursor: z.string().min(1).optional().describe("next_cursor of the previous page"),
    }),
    annotations: { readOnlyHint: true },
    source: "@tackle/docscript module",
    execute: async (input) => {
      ownDocument(input.doc_id);
      const page = await client.changes(input.doc_id, {
        limit: input.limit,
        ...(input.cursor === undefined ? {} : { cursor: input.cursor }),
      });
      return {
        doc_id: input.doc_id,
        changes: page.changes,
        ...(page.nextCursor === undefined ? {} : { next_cursor: page.nextCursor }),
      };
    },
  });
  // The `mcp` seat (served by the console and tackle mcp as MCP prompts and completion, not as tools):
  // the editing prompt, with the document's schema and script contract, for a document id it completes.
  const editPrompt = {
    name: "edit",
    title: "Edit a document",
    description:
      "Edit a structured document with a script: the workflow, the rules, the document's schema as the script contract, and worked scripts, for the edit tool.",
    arguments: [{ name: "doc_id", description: "The document to edit", required: true }],
  };
  // Documents as MCP resources: `docscript://documents/{doc_id}` reads the document's first snapshot
  // page (within the snapshot budget, with next_cursor for the edit tool), and its version is the last
  // change in the store's log, so a subscriber hears of a commit made anywhere.
  const documentUri = (docId: string) => `docscript://documents/${encodeURIComponent(docId)}`;
  const documentOf = (uri: string): string => {
    const match = /^docscript:\/\/documents\/([^/?#]+)$/.exec(uri);
    const docId = match === null ? undefined : decodeURIComponent(match[1] as string);
    if (docId === undefined)
      throw new ToolError("not_found", `No document resource "${uri}"`, {
        data: { resource: "mcp_resource", id: uri },
      });
    ownDocument(docId);
    return docId;
  };
  const seat = [
    defineTool({
      name: "mcp.resources",
      description: "This module's MCP resources: its documents, and the template that names one.",
      input: z.object({}),
      annotations: { readOnlyHint: true },
      execute: () => ({
        resources: [
          {
            uri: documentUri(sampleDocumentId),
            name: sampleDocumentId,
            title: "Sample timeline",
            description: "The sample timeline document: its first snapshot page (entities and relations)",
            mimeType: "application/json",
          },
        ],
        resourceTemplates: [
          {
            uriTemplate: "docscript://documents/{doc_id}",
            name: "document",
            title: "Document by id",
            description: "A document's first snapshot page; the edit tool's snapshot op reads further pages",
            mimeType: "application/json",
          },
        ],
      }),
    }),
    defineTool({
      name: "mcp.read",
      description: "Reads one of this module's MCP resources.",
      input: z.object({ uri: z.string() }),
      annotations: { readOnlyHint: true },
      execute: async ({ uri }, toolContext) => {
        const docId = documentOf(uri);
        const page = await docscript.execute({ op: "snapshot", doc_id: docId }, toolContext);
        return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(page) }] };
      },
    }),
    defineTool({
      name: "mcp.versions",
      description: "The version of each of this module's resources named: its document's last change.",
      input: z.object({ uris: z.array(z.string()).max(100) }),
      annotations: { readOnlyHint: true },
      execute: async ({ uris }) => {
        const versions: Record<string, string> = {};
        for (const uri of uris) {
          try {
            const { changes: last } = await client.changes(documentOf(uri), { limit: 1 });
            versions[uri] = String(last[0]?.seq ?? 0);
          } catch {
            // A URI this module cannot read has no version: its subscriber hears nothing.
          }
        }
        return { versions };
      },
    }),
    defineTool({
      name: "mcp.prompts",
      description: "This module's MCP prompts.",
      input: z.object({}),
      annotations: { readOnlyHint: true },
      execute: () => ({ prompts: [editPrompt] }),
    }),
    defineTool({
      name: "mcp.prompt",
      description: "One of this module's MCP prompts, with its arguments.",
      input: z.object({ name: z.string(), arguments: z.record(z.string(), z.string()).default({}) }),
      annotations: { readOnlyHint: true },
      execute: async ({ name, arguments: args }) => {
        if (name !== editPrompt.name)
          throw new ToolError(
            "invalid_input",
            `No prompt "${name}" here: the docscript module offers "edit"`,
          );
        const docId = args.doc_id ?? sampleDocumentId;
        ownDocument(docId);
        const { prompt } = await docscript.getModelContext({ doc_id: docId, context_id: "mcp-prompt" });
        return {
          description: `Edit the document "${docId}" with the edit tool`,
          messages: [{ role: "user", content: { type: "text", text: prompt } }],
        };
      },
    }),
    defineTool({
      name: "mcp.complete",
      description: "Completes this module's prompt arguments (document ids).",
      input: z.object({
        ref: z.object({ type: z.string() }).loose(),
        argument: z.object({ name: z.string(), value: z.string() }),
      }),
      annotations: { readOnlyHint: true },
      execute: ({ argument }) => ({
        values:
          argument.name === "doc_id" && sampleDocumentId.startsWith(argument.value) ? [sampleDocumentId] : [],
      }),
    }),
  ];
  return {
    tools: [edit, contextTool, changes, ...seat],
    async close() {
      await docscript.close();
      await server.close();
    },
  };
}

/**
 * The store DOCSCRIPT_DATABASE names: a `postgres://` URL opens PostgreSQL (never a SQLite file named
 * after the URL); a store that cannot be opened fails the module naming the variable, without a password.
 */
async function openStore(location: string): Promise<DocumentStore> {
  if (!/^postgres(ql)?:\/\//i.test(location)) return createSqliteDocumentStore({ path: location });
  const { createPostgresDocumentStore } = await import("../server/postgres/postgres-document-store.ts");
  try {
    return await createPostgresDocumentStore({ connectionString: location });
  } catch (error) {
    throw new Error(
      `DOCSCRIPT_DATABASE ${withoutPassword(location)}: cannot open the PostgreSQL document store: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    return "postgres://(unparsable URL)";
  }
}
