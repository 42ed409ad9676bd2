/** Test harness: real servers for integration suites. A missing server fails the run with the install command. */
export { type AbortCase, itHonoursAbort, promptlyMs } from "./abort-cases.ts";
export { freePort } from "./free-port.ts";
export { type KeptAliveSocket, openKeptAliveSocket } from "./kept-alive-socket.ts";
export { type NatsClusterHandle, type NatsClusterServer, startNatsCluster } from "./nats-cluster.ts";
export { type NatsServerHandle, startNatsServer } from "./nats-server.ts";
export { createTestDatabase, type TestDatabase, testPostgresUrl } from "./postgres.ts";
export { seededRandom } from "./seeded-random.ts";
export { type SilentServer, startSilentServer } from "./silent-server.ts";
export { startTcpRelay, type TcpRelay } from "./tcp-relay.ts";
export { loadFactor, measuredLagMs, testTimeoutMs, underLoadMs } from "./under-load.ts";
