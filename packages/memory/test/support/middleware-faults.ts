/**
 * The world of `middleware-faults.property.test.ts`: the real memory service over real HTTP (a
 * scratch SQLite file, two tenants) reached only through a `startTcpRelay` that cuts, loses answers
 * and goes down at random moments; each user's seeded secret; and the read-back of what was captured.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "@tackle/core";
import { startTcpRelay, type TcpRelay } from "@tackle/test-support";
import type { MemoryEvent } from "../../src/schemas/event.ts";
import { type MemoryServer, serveMemory } from "../../src/server/index.ts";

export const TENANTS = { acme: "key-acme", globex: "key-globex" } as const;
export type Tenant = keyof typeof TENANTS;

/** Every owner marker a text can carry: `acme-u0`, `globex-u3`. */
export const OWNER_MARK = /\b(?:acme|globex)-u\d+\b/g;

export const ownerTag = (tenant: Tenant, user: string) => `${tenant}-${user}`;
/** The one word only this user's memory holds. */
export const secretOf = (tenant: Tenant, user: string) => `secret${tenant}${user}word`;

export interface FaultyMemory {
  readonly relay: TcpRelay;
  readonly server: MemoryServer;
  /** What the relay did, for a failure message. */
  readonly log: string[];
  seed(tenant: Tenant, user: string): Promise<void>;
  /** Every event of a scope, oldest first, read in process (not through the relay). */
  events(tenant: Tenant, userId: string, sessionId: string): Promise<MemoryEvent[]>;
  /** Breaks the relay at random moments until the returned stop is called; stop heals it. */
  startFaults(random: () => number, maxStallMs: number): () => Promise<void>;
  close(): Promise<void>;
}

export async function startFaultyMemory(): Promise<FaultyMemory> {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-middleware-faults-"));
  const server = await serveMemory({
    store: join(directory, "memory.db"),
    apiKeys: { [TENANTS.acme]: "acme", [TENANTS.globex]: "globex" },
    host: "127.0.0.1",
    port: 0,
    logger: silentLogger,
  });
  const relay = await startTcpRelay(server.url);
  const log: string[] = [];
  return {
    relay,
    server,
    log,
    async seed(tenant, user) {
      const tag = ownerTag(tenant, user);
      await server.service.add(tenant, {
        userId: user,
        kind: "preference",
        content: `${tag} likes tea; the word is ${secretOf(tenant, user)}`,
      });
      // Enough more that the token budget has to cut.
      for (let index = 0; index < 6; index++) {
        await server.service.add(tenant, {
          userId: user,
          kind: "fact",
          content: `${tag} fact ${index} (${secretOf(tenant, user)}): ${"tea garden notes ".repeat(8)}number ${index}`,
        });
      }
    },
    async events(tenant, userId, sessionId) {
      const { events } = await server.service.recallConversation(tenant, {
        userId,
        sessionId,
        order: "asc",
        limit: 200,
      });
      return events;
    },
    startFaults(random, maxStallMs) {
      let running = true;
      const driving = (async () => {
        while (running) {
          await sleep(5 + random() * 40);
          if (!running) break;
          await breakOnce(relay, random, log, maxStallMs);
        }
      })();
      return async () => {
        running = false;
        await driving;
        stallable(relay).unstall?.();
        relay.up();
      };
    },
    async close() {
      await relay.close();
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

async function breakOnce(
  relay: TcpRelay,
  random: () => number,
  log: string[],
  maxStallMs: number,
): Promise<void> {
  const pick = random();
  if (pick < 0.2) {
    log.push("cut");
    relay.cut();
  } else if (pick < 0.35) {
    log.push("lose next answer");
    relay.loseNextAnswer();
  } else if (pick < 0.55) {
    log.push("lose answer to POST /v1/events");
    relay.loseAnswerTo(/^POST \/v1\/events /m);
  } else if (pick < 0.7) {
    log.push("lose answer to POST /v1/context");
    relay.loseAnswerTo(/^POST \/v1\/context /m);
  } else if (pick < 0.8) {
    // Often longer than the context deadline: the model is then called without memory.
    const windowMs = 20 + random() * 900;
    log.push(`down ${Math.round(windowMs)} ms`);
    relay.down();
    await sleep(windowMs);
    relay.up();
  } else if (pick < 0.9 && stallable(relay).stall !== undefined) {
    // Nothing closes, nothing gets through: only the middleware's own deadlines end the wait (a
    // stall may outlast a call's whole budget).
    const windowMs = 100 + random() * maxStallMs;
    log.push(`stall ${Math.round(windowMs)} ms`);
    stallable(relay).stall?.();
    await sleep(windowMs);
    stallable(relay).unstall?.();
  }
  // else: a quiet moment
}

/** The relay's stall, where this test-support has it (a half-open network: nothing gets through). */
function stallable(relay: TcpRelay): { stall?: () => void; unstall?: () => void } {
  return relay as unknown as { stall?: () => void; unstall?: () => void };
}

export const sleep = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));
