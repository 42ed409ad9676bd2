/**
 * The docscript module for `tackle serve`: an embedded document server on loopback holding a sample
 * timeline document, the edit-script tool on it, so a person can snapshot, script and commit from
 * the console, and the document's change log as the server keeps it. Bundle contract: a default-export function of `{ module, node, env, logger }` returning
 * `{ tools, close }`.
 */
import { randomBytes } from "node:crypto";
import { type Logger, silentLogger } from "@tackle/core";
import { createDocumentClient } from "../client/create-document-client.ts";
import type { DocumentStore } from "../server/document-store.ts";
import { serveDocuments } from "../server/serve-documents.ts";
import { createSqliteDocumentStore } from "../server/sqlite-document-store.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { createDocScriptTool } from "../tool/create-doc-script-tool.ts";
import { mcpSeat, moduleTools, sampleDocumentId } from "./module-tools.ts";
import { sampleTimelineSnapshot } from "./sample-timeline.ts";

export { sampleDocumentId } from "./module-tools.ts";

export interface DocScriptBundleContext {
  readonly module: string;
  readonly node: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly logger?: Logger;
}

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

  return {
    tools: [...moduleTools(docscript, client), ...mcpSeat(docscript, client)],
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
