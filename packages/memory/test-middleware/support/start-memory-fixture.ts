/**
 * The real memory service on a scratch SQLite file, as the middlewares reach it. Each tenant gets
 * its own client; `events` reads back what was captured.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { MemoryMiddlewareClient } from "../../src/middleware/memory-middleware-client.ts";
import type { MemoryEvent } from "../../src/schemas/event.ts";
import { createMemoryService } from "../../src/service/create-memory-service.ts";
import type { MemoryService } from "../../src/service/memory-service.ts";
import { createSqliteStore } from "../../src/store/sqlite/create-sqlite-store.ts";

export interface MemoryFixture {
  readonly service: MemoryService;
  readonly apiUrl: string;
  client(tenant: string): MemoryMiddlewareClient;
  /** Every event of a user in a tenant, oldest first. */
  events(tenant: string, userId: string, sessionId: string): Promise<MemoryEvent[]>;
  close(): Promise<void>;
}

export async function startMemoryFixture(): Promise<MemoryFixture> {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-middleware-"));
  const service = createMemoryService({ store: createSqliteStore({ path: join(directory, "memory.db") }) });
  return {
    service,
    apiUrl: "in-process://memory",
    client: (tenant) => ({
      buildContextBundle: (request) => service.contextBundle(tenant, request),
      writeEvent: (request) => service.writeEvent(tenant, request),
    }),
    async events(tenant, userId, sessionId) {
      const { events } = await service.recallConversation(tenant, {
        userId,
        sessionId,
        order: "asc",
        limit: 200,
      });
      return events;
    },
    async close() {
      await service.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
