/**
 * The docscript module's tools: the edit tool renamed for the module, its prompt as a `context` tool,
 * the change log, and the `mcp` seat (resources, prompts and completion over the sample document).
 */
import { defineTool, ToolError } from "@tackle/core";
import { z } from "zod";
import type { DocumentClient } from "../client/create-document-client.ts";
import { notFound } from "../tool/document-access.ts";
import type { DocScriptTool } from "../tool/tool-types.ts";

/** The sample document's id. */
export const sampleDocumentId = "sample-timeline";

/** The change log reads through the module's own client: the same rule, the same answer. */
const ownDocument = (docId: string) => {
  if (docId !== sampleDocumentId) throw notFound(docId);
};

/** `edit`, `context` and `changes`: the tool, its prompt, and the change log of the module's document. */
export function moduleTools(docscript: DocScriptTool, client: DocumentClient) {
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
  return [edit, contextTool, changes];
}

/** The `mcp` seat's tools: resources, reading one, their versions, prompts and completion. */
export function mcpSeat(docscript: DocScriptTool, client: DocumentClient) {
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
  return [
    defineTool({
      name: "mcp.resources",
      description: "This module's MCP resources: its documents, and the template that names one.",
      input: z.object({}),
      annotations: { readOnlyHint: true },
      execute: () => resourceListing,
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
}

const documentUri = (docId: string) => `docscript://documents/${encodeURIComponent(docId)}`;

/** The module's one document, and the template that names any. */
const resourceListing = {
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
};
