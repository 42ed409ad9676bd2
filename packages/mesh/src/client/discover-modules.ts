/** Finds modules by the services API: every mesh module's service answers `$SRV.INFO` with our metadata. */
import type { NatsConnection } from "@nats-io/transport-node";

/** Modules that answer the services API's INFO with our metadata, within a short window. */
export async function discoverModules(connection: NatsConnection, windowMs: number): Promise<string[]> {
  const found = new Set<string>();
  try {
    const replies = await connection.requestMany("$SRV.INFO", undefined, { maxWait: windowMs });
    for await (const reply of replies) {
      try {
        const info = reply.json<{ name?: string; metadata?: Record<string, string> }>();
        if (info.metadata?.tackle === "mesh" && typeof info.name === "string") found.add(info.name);
      } catch {
        // Another service's malformed INFO is not ours to report.
      }
    }
  } catch {
    // No service answered at all: nothing to add.
  }
  return [...found];
}
