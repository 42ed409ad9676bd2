/** The soak's two sides, started side by side: a NATS cluster with two mesh nodes; a private PostgreSQL with two document servers, two durable runners and two memory services on it. */
import type { ChildProcess } from "node:child_process";
import { createMeshClient, issueMembership, openMeshBuckets } from "@tackle/mesh";
import { freePort, startNatsCluster } from "@tackle/test-support";
import pg from "pg";
import {
  adminToken,
  bundle,
  documentServerScript,
  durableLeaseMs,
  durableRunnerScript,
  memoryJobLeaseMs,
  memoryServiceScript,
  meshTimeoutMs,
  nodeScript,
  spawnReady,
  startPrivatePostgres,
} from "./soak-processes.ts";

type Track = (child: ChildProcess) => ChildProcess;
type Cleanup = (() => Promise<void>)[];

export async function startSoakProcesses(track: Track, cleanup: Cleanup) {
  const startNode = (name: string, order: string[]) =>
    spawnReady(nodeScript, [name, order.join(","), "pool", bundle]).then((started) => track(started.process));
  // Both sides settle before anything is cleaned up, so no process starts after the cleanup ran.
  const [meshStarted, databaseStarted] = await Promise.allSettled([
    startMeshSide(startNode, cleanup),
    startDatabaseSide(track, cleanup),
  ]);
  if (meshStarted.status === "rejected") throw meshStarted.reason;
  if (databaseStarted.status === "rejected") throw databaseStarted.reason;
  return { ...meshStarted.value, startNode, ...databaseStarted.value };
}

/** A three-server NATS cluster, R3 buckets, and two node processes serving one bundle. */
async function startMeshSide(
  startNode: (name: string, order: string[]) => Promise<ChildProcess>,
  cleanup: Cleanup,
) {
  const cluster = await startNatsCluster({ size: 3 });
  cleanup.push(() => cluster.close());
  // R3 buckets, two node processes serving one bundle.
  const client = await createMeshClient({ servers: cluster.urls, timeoutMs: meshTimeoutMs });
  cleanup.push(() => client.close());
  await openMeshBuckets(client.connection, { replicas: 3 });
  const urls = cluster.servers.map((server) => server.url);
  for (const node of ["soak-a", "soak-b"]) await issueMembership(client.connection, { node, module: "pool" });
  const [nodeA] = await Promise.all([
    startNode("soak-a", urls),
    startNode("soak-b", [...urls.slice(1), urls[0] as string]),
  ]);
  return { cluster, client, urls, nodeA };
}

/** A private PostgreSQL, then two document servers, two durable runners and two memory services on it. */
async function startDatabaseSide(track: Track, cleanup: Cleanup) {
  const database = await startPrivatePostgres();
  cleanup.push(() => database.close());
  const admin = new pg.Pool({ connectionString: database.url, max: 2 });
  admin.on("error", () => undefined);
  cleanup.push(() => admin.end());
  await admin.query("CREATE DATABASE soak_durable");
  await admin.query("CREATE DATABASE soak_memory");
  const durableUrl = database.urlOf("soak_durable");
  const memoryUrl = database.urlOf("soak_memory");
  const durableSql = new pg.Pool({ connectionString: durableUrl, max: 2 });
  durableSql.on("error", () => undefined);
  cleanup.push(() => durableSql.end());
  const memorySql = new pg.Pool({ connectionString: memoryUrl, max: 2 });
  memorySql.on("error", () => undefined);
  cleanup.push(() => memorySql.end());
  await durableSql.query(
    "CREATE TABLE soak_tool_effects (idempotency_key TEXT NOT NULL, attempt INTEGER NOT NULL, pid INTEGER NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())",
  );
  // Durable runners and memory services keep their port across a restart: clients list them.
  const runnerPorts = [await freePort(), await freePort()] as const;
  const memoryPorts = [await freePort(), await freePort()] as const;
  const startDocs = () =>
    spawnReady(documentServerScript, [database.url, adminToken]).then((started) => ({
      process: track(started.process),
      url: started.line.split(" ")[1] as string,
    }));
  const startRunner = (port: number) =>
    spawnReady(durableRunnerScript, [durableUrl, String(durableLeaseMs), String(port)]).then((started) => ({
      process: track(started.process),
      url: started.line.split(" ")[1] as string,
    }));
  // Each service process connects under its own application_name: the soak sees when nothing of a
  // killed one is left in the database (bench/soak/memory-victim.ts).
  let memoryStarts = 0;
  const startMemory = (port: number) => {
    const application = `soak-memory-${++memoryStarts}`;
    return spawnReady(memoryServiceScript, [
      `${memoryUrl}?application_name=${application}`,
      String(memoryJobLeaseMs),
      String(port),
    ]).then((started) => ({
      process: track(started.process),
      url: started.line.split(" ")[1] as string,
      application,
    }));
  };
  const [docsA, docsB, runnerA, runnerB, memoryA, memoryB] = await Promise.all([
    startDocs(),
    startDocs(),
    startRunner(runnerPorts[0]),
    startRunner(runnerPorts[1]),
    startMemory(memoryPorts[0]),
    startMemory(memoryPorts[1]),
  ]);
  return {
    database,
    durableSql,
    memorySql,
    runnerPorts,
    memoryPorts,
    startDocs,
    startRunner,
    startMemory,
    docsA,
    docsB,
    runnerA,
    runnerB,
    memoryA,
    memoryB,
  };
}
