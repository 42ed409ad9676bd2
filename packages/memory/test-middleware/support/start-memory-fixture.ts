/**
 * The real memory service over real HTTP on a loopback port, on a scratch SQLite file, with one
 * API key per tenant; `events` reads back what was captured.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemoryClient } from "../../src/client/memory-client.ts";
import type { MemoryEvent } from "../../src/schemas/event.ts";
import { serveMemory } from "../../src/server/index.ts";
import type { MemoryService } from "../../src/service/memory-service.ts";

export const TENANT_KEYS = { acme: "key-acme", globex: "key-globex" } as const;

export interface MemoryFixture {
  /** The service behind the HTTP API, for seeding and reading back. */
  readonly service: MemoryService;
  readonly apiUrl: string;
  /** A real `MemoryClient` holding the tenant's API key. */
  client(tenant: keyof typeof TENANT_KEYS): MemoryClient;
  /** Every event of a user's session in a tenant, oldest first. */
  events(tenant: string, userId: string, sessionId: string): Promise<MemoryEvent[]>;
  close(): Promise<void>;
}

export async function startMemoryFixture(): Promise<MemoryFixture> {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-middleware-"));
  const server = await serveMemory({
    store: join(directory, "memory.db"),
    apiKeys: { [TENANT_KEYS.acme]: "acme", [TENANT_KEYS.globex]: "globex" },
    host: "127.0.0.1",
    port: 0,
  });
  return {
    service: server.service,
    apiUrl: server.url,
    client: (tenant) =>
      new MemoryClient({ baseUrl: server.url, apiKey: TENANT_KEYS[tenant], allowPrivateNetwork: true }),
    async events(tenant, userId, sessionId) {
      const { events } = await server.service.recallConversation(tenant, {
        userId,
        sessionId,
        order: "asc",
        limit: 200,
      });
      return events;
    },
    async close() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
