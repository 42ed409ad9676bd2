/**
 * A document server process for the concurrent-editors property. Usage:
 * concurrent-editors-server.ts sqlite <file> <admin token> | postgres <url> <admin token>, then
 * optionally `compactEvery` (the log compacted every that many updates).
 * Prints "ready <url>" once it listens; closes on SIGTERM.
 */
import { timelineSchema } from "../src/index.ts";
import { createSqliteDocumentStore, serveDocuments } from "../src/server/index.ts";
import { createPostgresDocumentStore } from "../src/server/postgres/index.ts";

const [kind, where, adminToken, compactEvery] = process.argv.slice(2) as [string, string, string, string?];
const store =
  kind === "sqlite"
    ? createSqliteDocumentStore({ path: where })
    : await createPostgresDocumentStore({ connectionString: where });
// Failures on stderr: the property prints them with a failing round.
const write = (level: string) => (message: string, fields?: Record<string, unknown>) => {
  process.stderr.write(`${level} ${message} ${JSON.stringify(fields ?? {})}\n`);
};
const ignore = () => {};
const logger = { debug: ignore, info: ignore, warn: write("warn"), error: write("error") };
const server = await serveDocuments({
  store,
  schema: timelineSchema,
  adminToken,
  logger,
  ...(compactEvery === undefined ? {} : { compactEvery: Number(compactEvery) }),
});
process.stdout.write(`ready ${server.url}\n`);
process.once("SIGTERM", () => {
  void server.close().then(() => process.exit(0));
});
