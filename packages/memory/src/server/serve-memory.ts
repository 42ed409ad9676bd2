/** Runs the memory service's HTTP API on a port: loopback by default, a remote bind only when asked. */
import type { AddressInfo } from "node:net";
import type { LanguageModelV4 } from "@ai-sdk/provider";
import { serve } from "@hono/node-server";
import type { Logger } from "@tackle/core";
import { isLoopbackHost } from "@tackle/core/internal";
import { MemoryError } from "../errors/memory-error.ts";
import { createMemoryService } from "../service/create-memory-service.ts";
import type { MemoryEmbeddingModel } from "../service/embedder.ts";
import type { IdempotencyOptions } from "../service/idempotent-writes.ts";
import type { MemoryService } from "../service/memory-service.ts";
import type { MemoryQuotaOptions } from "../service/quotas.ts";
import type { MemoryRetentionOptions } from "../service/retention.ts";
import type { MemoryStore } from "../store/memory-store.ts";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import type { ApiKeyEntry, ApiKeyResolver } from "./api-keys.ts";
import { createMemoryApp } from "./create-memory-app.ts";
import type { RateLimit } from "./rate-limiter.ts";
import { withoutPassword } from "./without-password.ts";

export interface ServeMemoryOptions {
  /** A store, or where to open one: a SQLite file path or a `postgres://` URL. */
  readonly store: MemoryStore | string;
  /** `{ key: tenant }`, `{ key: { tenant, userId?, agentId? } }` for a key bound to one identity, or a resolver. */
  readonly apiKeys: Readonly<Record<string, ApiKeyEntry>> | ApiKeyResolver;
  readonly host?: string;
  /** 0 picks a free port. Default 4280. */
  readonly port?: number;
  /** Binding anything but loopback needs this, because API keys then cross a network. */
  readonly allowRemote?: boolean;
  readonly embeddingModel?: MemoryEmbeddingModel;
  /** The embedding's weight in fused ranking (the service's default, 0.1, unless given). */
  readonly vectorWeight?: number;
  readonly languageModel?: LanguageModelV4;
  readonly logger?: Logger;
  readonly rateLimit?: RateLimit;
  /**
   * Requests with a body one tenant may have in flight at once (default 64); past it 429. A whole
   * number of at least 1, else a `RangeError` naming `maxInFlight` before the port is taken.
   */
  readonly maxInFlight?: number;
  /** How long idempotency keys of writes are kept (24 h), how long a repeat waits for the first answer (5 s). */
  readonly idempotency?: IdempotencyOptions;
  /** How many traces and finished jobs a tenant keeps and for how long, and days of access counts (ADR 0537). */
  readonly retention?: MemoryRetentionOptions;
  /** What each tenant may store (ADR 0538); see `MemoryServiceOptions.quotas`. */
  readonly quotas?: MemoryQuotaOptions;
}

export interface MemoryServer {
  readonly url: string;
  readonly port: number;
  readonly service: MemoryService;
  close(): Promise<void>;
}

export const DEFAULT_MEMORY_PORT = 4280;

/** Opens the store a configuration string names: `postgres://…` or a SQLite file path. */
export async function openMemoryStore(location: string): Promise<MemoryStore> {
  if (/^postgres(ql)?:\/\//.test(location)) {
    const { createPostgresStore } = await import("../store/postgres/create-postgres-store.ts");
    try {
      return await createPostgresStore({ connectionString: location });
    } catch (error) {
      // "connect ECONNREFUSED 127.0.0.1:5432" alone does not say it was the memory store's database.
      throw Object.assign(
        new Error(
          `Cannot open the memory store ${withoutPassword(location)} (PostgreSQL): ${(error as Error).message}`,
          { cause: error },
        ),
        { code: (error as { code?: unknown }).code },
      );
    }
  }
  return createSqliteStore({ path: location });
}

export async function serveMemory(options: ServeMemoryOptions): Promise<MemoryServer> {
  const host = options.host ?? "127.0.0.1";
  if (!isLoopbackHost(host) && !options.allowRemote) {
    throw new MemoryError(
      "invalid_input",
      `Refusing to listen on ${host}: set allowRemote to serve beyond loopback`,
      400,
    );
  }
  const store = typeof options.store === "string" ? await openMemoryStore(options.store) : options.store;
  let service: MemoryService | undefined;
  let app: ReturnType<typeof createMemoryApp>;
  try {
    // Both check their limits (quotas, retention, maxInFlight) here, before a port is taken.
    service = createMemoryService({
      store,
      ...(options.embeddingModel ? { embeddingModel: options.embeddingModel } : {}),
      ...(options.vectorWeight !== undefined ? { vectorWeight: options.vectorWeight } : {}),
      ...(options.languageModel ? { languageModel: options.languageModel } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.idempotency ? { idempotency: options.idempotency } : {}),
      ...(options.retention ? { retention: options.retention } : {}),
      ...(options.quotas ? { quotas: options.quotas } : {}),
    });
    app = createMemoryApp({
      service,
      apiKeys: options.apiKeys,
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.rateLimit ? { rateLimit: options.rateLimit } : {}),
      ...(options.maxInFlight === undefined ? {} : { maxInFlight: options.maxInFlight }),
    });
  } catch (error) {
    // A store opened here is closed here (with the service's timers, if it was made).
    if (typeof options.store === "string") await (service ?? store).close();
    throw error;
  }
  let server: ReturnType<typeof serve>;
  try {
    server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
      const instance = serve(
        {
          fetch: app.fetch,
          hostname: host,
          port: options.port ?? DEFAULT_MEMORY_PORT,
          // Advertises `Keep-Alive: timeout=5` and holds an idle connection 25 s more: Node checks its
          // idle timer before it reads the socket, so after the event loop was held past 5 s (a large
          // import, a busy machine) a client's next request on its pooled connection met a destroyed
          // socket (ECONNRESET), and a POST is not retried.
          serverOptions: { keepAliveTimeout: 5_000, keepAliveTimeoutBuffer: 25_000 },
        },
        () => resolve(instance),
      );
      instance.once("error", reject);
    });
  } catch (error) {
    // A store opened here is closed here; one the caller passed stays theirs.
    if (typeof options.store === "string") await service.close();
    throw error;
  }
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    service,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
      await service.close();
    },
  };
}
