/**
 * The assistant's driver: the durable runner (its journal in SQLite) that runs the video assistant's
 * graph, its tools called over the mesh with a client credential, its runs served over durable's HTTP
 * API on loopback (start, watch, approve). A driver that dies leaves its runs `running`; the next driver
 * on the same journal takes them over once their lease has passed (its recovery sweep), and a step whose
 * tool had already run gets the recorded result from the module's ledger.
 *
 * Usage: driver.ts  (settings from the environment)
 *   MESH_BROKER_URL, MESH_BROKER_FILE  the broker and the client credential (`tackle mesh issue-client`)
 *   ASSISTANT_STORE                    the journal's SQLite file (default ./video-assistant.sqlite)
 *   ASSISTANT_PORT                     the HTTP port on 127.0.0.1 (default 4290; 0 for a free one)
 *   ASSISTANT_LEASE_MS                 the runs' lease (default 5000)
 *   ASSISTANT_TRANSCRIBE_SECONDS       how long a transcription takes (default 0.3)
 * Prints `ready <url>` once it serves.
 */
import { createRunner } from "@tackle/durable";
import { serveDurable } from "@tackle/durable/http";
import { createMeshClient } from "@tackle/mesh";
import { createAssistantGraph } from "./agent.ts";

const env = process.env;
const mesh = await createMeshClient({
  servers: env.MESH_BROKER_URL ?? "nats://127.0.0.1:4222",
  ...(env.MESH_BROKER_FILE ? { credsFile: env.MESH_BROKER_FILE } : {}),
  timeoutMs: 20_000,
});
const graph = createAssistantGraph({
  mesh,
  transcribeSeconds: Number(env.ASSISTANT_TRANSCRIBE_SECONDS ?? 0.3),
  onCall: (event) => {
    if (!event.ok) process.stderr.write(`${JSON.stringify({ msg: "mesh call failed", ...event })}\n`);
  },
});
const runner = createRunner({
  store: env.ASSISTANT_STORE ?? "video-assistant.sqlite",
  graphs: [graph],
  leaseMs: Number(env.ASSISTANT_LEASE_MS ?? 5000),
  // A run killed mid-step again and again is still taken over: each driver restart is one takeover.
  maxTakeovers: 1000,
});
const server = await serveDurable({ runner, port: Number(env.ASSISTANT_PORT ?? 4290) });
process.stdout.write(`ready ${server.url}\n`);

const stop = async () => {
  await server.close();
  await runner.close();
  await mesh.close();
  process.exit(0);
};
process.once("SIGINT", () => void stop());
process.once("SIGTERM", () => void stop());
