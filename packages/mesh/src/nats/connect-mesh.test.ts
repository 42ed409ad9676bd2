import assert from "node:assert/strict";
import { it } from "node:test";
import { MeshConfigError } from "../errors/mesh-config-error.ts";
import { connectMesh } from "./connect-mesh.ts";

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
