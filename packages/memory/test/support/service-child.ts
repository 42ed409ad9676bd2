/**
 * A memory service process on a shared PostgreSQL database, for the multi-process tests. Usage:
 * service-child.ts <postgres url> <job lease ms> [port]. Prints "ready <url>" once it listens. A port
 * lets a restarted service come back at the address its clients list (the soak restarts it).
 */
import { createPostgresStore } from "@tackle/memory/postgres";
import { serveMemory } from "@tackle/memory/server";

const [url, leaseMs, port] = process.argv.slice(2) as [string, string, string | undefined];
const store = await createPostgresStore({ connectionString: url, jobLeaseMs: Number(leaseMs) });
const server = await serveMemory({
  store,
  apiKeys: { "key-a": "tenant-a" },
  port: port === undefined ? 0 : Number(port),
});
process.stdout.write(`ready ${server.url}\n`);
process.once("SIGTERM", () => {
  void server.close().then(() => process.exit(0));
});
