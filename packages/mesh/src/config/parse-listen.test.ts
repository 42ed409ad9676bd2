import assert from "node:assert/strict";
import { test } from "node:test";
import { MeshConfigError } from "../errors/mesh-config-error.ts";
import { loadMeshConfig } from "./load-mesh-config.ts";
import { formatListenAddress, parseListenAddress } from "./parse-listen.ts";

test("loopback addresses are accepted with their port; absent or empty is 127.0.0.1:4270", () => {
  assert.deepEqual(parseListenAddress("127.0.0.1:4270"), { host: "127.0.0.1", port: 4270 });
  assert.deepEqual(parseListenAddress("localhost:0"), { host: "localhost", port: 0 });
  assert.deepEqual(parseListenAddress("[::1]:9000"), { host: "::1", port: 9000 });
  assert.deepEqual(parseListenAddress(" 127.8.9.10:1 "), { host: "127.8.9.10", port: 1 });
  assert.deepEqual(parseListenAddress(undefined), { host: "127.0.0.1", port: 4270 });
  assert.deepEqual(parseListenAddress(""), { host: "127.0.0.1", port: 4270 });
  assert.equal(formatListenAddress({ host: "::1", port: 9 }), "[::1]:9");
});

test("anything reachable from another machine is refused, naming the variable and the fix", () => {
  for (const value of [
    "0.0.0.0:4270",
    "[::]:4270",
    "192.168.1.5:4270",
    "example.com:4270",
    "localhost.evil.example:1",
  ]) {
    for (const variable of ["MESH_CONSOLE_LISTEN", "--listen"]) {
      assert.throws(
        () => parseListenAddress(value, variable),
        (error: unknown) =>
          MeshConfigError.isInstance(error) &&
          error.variable === variable &&
          error.message.startsWith(`${variable}: ${value} refused: the console answers on loopback only`) &&
          error.message.includes("127.0.0.1:4270"),
        value,
      );
    }
  }
});

test("malformed values are refused as such", () => {
  for (const value of ["4270", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", "::1:4270"]) {
    assert.throws(
      () => parseListenAddress(value),
      (error: unknown) => MeshConfigError.isInstance(error) && /is not host:port/.test(error.message),
      value,
    );
  }
});

test("the mesh configuration reads MESH_CONSOLE_LISTEN with the same rules (0.0.0.0 was accepted there)", () => {
  assert.throws(
    () => loadMeshConfig({ MESH_CONSOLE_LISTEN: "0.0.0.0:4270" }),
    (error: unknown) =>
      MeshConfigError.isInstance(error) &&
      /0\.0\.0\.0:4270 refused: the console answers on loopback only/.test(error.message),
  );
});
