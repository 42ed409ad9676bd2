/**
 * A document server process on a shared PostgreSQL database, for the two-server tests. Usage:
 * server-child.ts <postgres url> <admin token>. Prints "ready <url>" once it listens.
 */
import { timelineSchema } from "../../src/index.ts";
import { serveDocuments } from "../../src/server/index.ts";
import { createPostgresDocumentStore } from "../../src/server/postgres/index.ts";

const [url, adminToken] = process.argv.slice(2) as [string, string];
const server = await serveDocuments({
  store: await createPostgresDocumentStore({ connectionString: url }),
  schema: timelineSchema,
  adminToken,
});
process.stdout.write(`ready ${server.url}\n`);
process.once("SIGTERM", () => {
  void server.close().then(() => process.exit(0));
});
