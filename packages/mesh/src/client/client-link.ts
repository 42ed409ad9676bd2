/**
 * The client's link to the broker: the connection, its request/reply and node watch, and what the
 * client knows of the broker (connected, or since when it is reconnecting).
 */

import type { NatsConnection } from "@nats-io/transport-node";
import { PermissionViolationError } from "@nats-io/transport-node";
import { ToolError } from "@tackle/core";
import { redactBrokerUrl } from "../config/redact-broker-url.ts";
import { DEFAULT_BROKER_URL } from "../nats/connect-mesh.ts";
import type { BrokerStatus } from "./mesh-client-api.ts";
import { createNodeWatch, type NodeWatch, type NodeWatchOptions } from "./node-watch.ts";
import { createRequester, type Requester } from "./request-reply.ts";

export interface ClientLink {
  readonly connection: NatsConnection;
  readonly requester: Requester;
  /** Which node holds each call, and whether it is still there (absent when turned off). */
  readonly watch: NodeWatch | undefined;
  /** The broker URL(s), passwords redacted. */
  readonly brokerUrl: string;
  /** While reconnecting, a request would sit in the client's buffer until its timeout: callers fail at once. */
  disconnected(): boolean;
  broker(): BrokerStatus;
  close(ownsConnection: boolean): Promise<void>;
}

export function openClientLink(
  connection: NatsConnection,
  options: {
    readonly servers?: string | undefined;
    readonly nodeWatch?: NodeWatchOptions | false | undefined;
  },
): ClientLink {
  const brokerUrl = redactBrokerUrl(options.servers ?? connection.getServer() ?? DEFAULT_BROKER_URL);
  let disconnected = false;
  let lastDisconnect: string | undefined;
  /**
   * Tool calls' request/reply. When the connection drops, calls in flight wait for the node watch to
   * learn their fate once it is back (ADR 0208); one whose deadline comes first fails `disconnected`.
   * Without the watch they fail at once.
   */
  const requester = createRequester(connection, {
    suspendedDeadline: (call) =>
      new ToolError(
        "disconnected",
        disconnected
          ? `"${call.name}" was in flight when the connection to NATS dropped, and the broker ${brokerUrl} is still unreachable; it may or may not have run (retry with the same idempotency key)`
          : `"${call.name}" was in flight when the connection to NATS dropped, and what became of it could not be learned by its deadline; it may or may not have run (retry with the same idempotency key)`,
        { retryable: true, data: { tool: call.name, brokerConnected: !disconnected } },
      ),
  });
  const watch =
    options.nodeWatch === false
      ? undefined
      : createNodeWatch(
          connection,
          {
            inFlight: () => requester.inFlight(),
            isWaiting: (token) => requester.isWaiting(token),
            lost: (token, error) => requester.settle(token, error),
          },
          options.nodeWatch,
        );
  const statusWatch = (async () => {
    for await (const status of connection.status()) {
      if (status.type === "reconnect") {
        disconnected = false;
        watch?.resume();
      }
      // A publish the server refused fails its call now, as nats.js's own requests do.
      if (status.type === "error" && status.error instanceof PermissionViolationError)
        requester.refused(status.error);
      if (status.type !== "disconnect") continue;
      disconnected = true;
      watch?.pause();
      lastDisconnect = new Date().toISOString();
      const dropped = new ToolError(
        "disconnected",
        "The connection to NATS dropped while the call was in flight; it may or may not have run (retry with the same idempotency key)",
        { retryable: true },
      );
      if (watch === undefined) requester.failAll(dropped);
      else requester.suspendAll(dropped);
    }
  })().finally(() => requester.failAll(new Error("connection closed")));
  statusWatch.catch(() => undefined);

  return {
    connection,
    requester,
    watch,
    brokerUrl,
    disconnected: () => disconnected,
    broker() {
      if (connection.isClosed()) {
        return {
          url: brokerUrl,
          connected: false,
          error: `The broker ${brokerUrl} is unreachable: the connection is closed`,
        };
      }
      if (!disconnected) return { url: brokerUrl, connected: true };
      return {
        url: brokerUrl,
        connected: false,
        error: `The broker ${brokerUrl} is unreachable (reconnecting since ${lastDisconnect ?? "start"})`,
      };
    },
    async close(ownsConnection) {
      watch?.close();
      // A connection still dialling (a broker down, a credential revoked) has nothing to drain and
      // would wait for a reconnect that may never come: it is closed.
      if (ownsConnection)
        await (disconnected ? connection.close() : connection.drain().catch(() => connection.close()));
      requester.close();
    },
  };
}
