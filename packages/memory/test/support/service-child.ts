/**
 * A memory service process on a shared PostgreSQL database, for the multi-process tests. Usage:
 * service-child.ts <postgres url> <job lease ms>. Prints "ready <url>" once it listens.
 */
import { createPostgresStore } from "@tackle/memory/postgres";
import { serveMemory } from "@tackle/memory/server";

const [url, leaseMs] = process.argv.slice(2) as [string, string];
const store = await createPostgresStore({ connectionString: url, jobLeaseMs: Number(leaseMs) });
const server = await serveMemory({ store, apiKeys: { "key-a": "tenant-a" }, port: 0 });
process.stdout.write(`ready ${server.url}\n`);
process.once("SIGTERM", () => {
  void server.close().then(() => process.exit(0));
});
