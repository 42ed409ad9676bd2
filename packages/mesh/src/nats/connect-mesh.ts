/** `connectMesh`: a NATS connection on the node's credential (JWT + nkey) or a plain URL, reconnecting forever. */
import { connect, credsAuthenticator, type NatsConnection } from "@nats-io/transport-node";
import { ToolAbortedError } from "@tackle/core";
import { readCredential } from "../config/read-credential.ts";
import { MeshConfigError } from "../errors/mesh-config-error.ts";

export interface ConnectMeshOptions {
  /** Server URL(s), comma-separated. Default nats://127.0.0.1:4222 when only a credential is given. */
  readonly servers?: string;
  /** A NATS credentials file (user JWT + nkey seed). */
  readonly credsFile?: string;
  /** The connection's name, shown by the server's monitoring. */
  readonly name?: string;
  /** Pause between reconnect attempts. Default 250 ms. */
  readonly reconnectTimeWaitMs?: number;
  /** How long the first connection may take (the broker's greeting included). Default 20 000 ms. */
  readonly connectTimeoutMs?: number;
  /**
   * Ends the wait for the first connection: `aborted` at once (aborted before: nothing is dialled).
   * nats.js cannot drop a connection mid-handshake, and leaves the socket of one that timed out open
   * against a broker that never greets: the broker's side closes it.
   */
  readonly signal?: AbortSignal | undefined;
}

export const DEFAULT_BROKER_URL = "nats://127.0.0.1:4222";

/**
 * How long a reconnect's handshake (the broker's greeting, then its answer to CONNECT) may take (ADR
 * 0228). nats.js waits for that answer for the connection's `timeout` even when the socket closed
 * under it: a connection reset in the handshake (a network blip, a proxy dropping it) left a node
 * disconnected for the first connection's 20 s. A broker that answers at all answers in milliseconds;
 * a handshake cut short is tried again after `reconnectTimeWaitMs`.
 */
export const RECONNECT_HANDSHAKE_MS = 5_000;

export async function connectMesh(options: ConnectMeshOptions): Promise<NatsConnection> {
  if (options.servers === undefined && options.credsFile === undefined) {
    throw new MeshConfigError(
      "MESH_BROKER_URL",
      "no broker: set MESH_BROKER_FILE (the node's credential) or MESH_BROKER_URL (a plain URL)",
    );
  }
  const signal = options.signal;
  if (signal?.aborted) throw new ToolAbortedError("mesh.connect", signal.reason);
  const servers = (options.servers ?? DEFAULT_BROKER_URL).split(",").map((server) => server.trim());
  const credential = options.credsFile === undefined ? undefined : readCredential(options.credsFile);
  const authenticator = credential === undefined ? undefined : credsAuthenticator(credential.bytes);
  const connecting = connect({
    servers,
    timeout: options.connectTimeoutMs ?? 20_000,
    ...(authenticator === undefined ? {} : { authenticator }),
    ...(options.name === undefined ? {} : { name: options.name }),
    // A Tackle-issued credential may subscribe only to its own inbox prefix (ADR 0209).
    ...(credential?.inboxPrefix === undefined ? {} : { inboxPrefix: credential.inboxPrefix }),
    // A node's runtime outlives any broker restart: it never gives up reconnecting.
    maxReconnectAttempts: -1,
    reconnectTimeWait: options.reconnectTimeWaitMs ?? 250,
    waitOnFirstConnect: false,
    // Every request would otherwise capture two stack traces up front (for a timeout's error), the
    // largest single cost of a call in a profile; the mesh maps request errors to its own anyway.
    noAsyncTraces: true,
  });
  const bounded = connecting.then((connection) => boundReconnectHandshake(connection));
  if (signal === undefined) return bounded;
  return new Promise<NatsConnection>((resolve, reject) => {
    const onAbort = () => {
      reject(new ToolAbortedError("mesh.connect", signal.reason));
      // A connection that completes after the abort is closed at once.
      connecting.then(
        (late) => late.close(),
        () => undefined,
      );
    };
    signal.addEventListener("abort", onAbort, { once: true });
    bounded.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * Once connected, later handshakes (reconnects) get `RECONNECT_HANDSHAKE_MS` at most: nats.js reads
 * the limit of each dial from the connection's options, which its protocol handler shares.
 */
function boundReconnectHandshake(connection: NatsConnection): NatsConnection {
  const options = (connection as unknown as { options?: { timeout?: number } }).options;
  if (typeof options?.timeout === "number")
    options.timeout = Math.min(options.timeout, RECONNECT_HANDSHAKE_MS);
  return connection;
}
