import assert from "node:assert/strict";
import { it } from "node:test";
import { startNatsServer, startTcpRelay } from "@tackle/test-support";
import { MeshConfigError } from "../errors/mesh-config-error.ts";
import { connectMesh, RECONNECT_HANDSHAKE_MS } from "./connect-mesh.ts";

it("refuses to connect without a broker, naming what to set", async () => {
  await assert.rejects(connectMesh({}), (error: unknown) => {
    assert.ok(MeshConfigError.isInstance(error));
    assert.equal(error.variable, "MESH_BROKER_URL");
    assert.match(error.message, /set MESH_BROKER_FILE \(the node's credential\) or MESH_BROKER_URL/);
    return true;
  });
});

it("names an unreadable credentials file by its variable", async () => {
  await assert.rejects(connectMesh({ credsFile: "/nonexistent/node.creds" }), (error: unknown) => {
    assert.ok(MeshConfigError.isInstance(error));
    assert.equal(error.variable, "MESH_BROKER_FILE");
    return true;
  });
});

it("reconnects within the handshake bound when the reconnect's handshake is reset (ADR 0228), not after 20 s", async () => {
  const nats = await startNatsServer({ jetstream: false });
  const relay = await startTcpRelay(nats.url);
  const connection = await connectMesh({ servers: relay.url });
  try {
    await connection.flush();
    // The next connection's CONNECT goes through; the broker's answer to it is lost in a reset.
    relay.loseAnswerTo(/CONNECT/);
    const reconnected = (async () => {
      for await (const status of connection.status()) if (status.type === "reconnect") return;
    })();
    const cutAt = performance.now();
    relay.cut();
    await reconnected;
    await connection.flush();
    const took = performance.now() - cutAt;
    assert.equal(relay.resets, 1, "the reconnect's handshake was reset");
    // The handshake bound, a reconnect wait and slack; nats.js alone waited its 20 s connect timeout.
    assert.ok(took < RECONNECT_HANDSHAKE_MS + 5_000, `reconnected ${Math.round(took)} ms after the cut`);
  } finally {
    await connection.close();
    await relay.close();
    await nats.close();
  }
});
