import assert from "node:assert/strict";
import { test } from "node:test";
import { CliError } from "../program/cli-error.ts";
import { isLoopbackHost, parseListen } from "./parse-listen.ts";

test("loopback addresses are accepted with their port", () => {
  assert.deepEqual(parseListen("127.0.0.1:4270"), { host: "127.0.0.1", port: 4270 });
  assert.deepEqual(parseListen("localhost:0"), { host: "localhost", port: 0 });
  assert.deepEqual(parseListen("[::1]:9000"), { host: "::1", port: 9000 });
  assert.deepEqual(parseListen("127.8.9.10:1"), { host: "127.8.9.10", port: 1 });
  assert.deepEqual(parseListen(), { host: "127.0.0.1", port: 4270 });
});

test("anything reachable from another machine is refused, naming the variable and the fix", () => {
  for (const value of [
    "0.0.0.0:4270",
    "[::]:4270",
    "192.168.1.5:4270",
    "example.com:4270",
    "localhost.evil.example:1",
  ]) {
    assert.throws(
      () => parseListen(value),
      (error: unknown) =>
        CliError.isInstance(error) &&
        error.code === "not_loopback" &&
        error.message.includes(`MESH_CONSOLE_LISTEN=${value} refused`) &&
        error.message.includes("127.0.0.1:4270"),
    );
  }
});

test("malformed values are refused as such", () => {
  for (const value of ["4270", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", ""]) {
    assert.throws(
      () => parseListen(value),
      (error: unknown) => CliError.isInstance(error) && error.code === "invalid_listen",
    );
  }
});

test("isLoopbackHost knows the loopback names", () => {
  assert.equal(isLoopbackHost("LOCALHOST"), true);
  assert.equal(isLoopbackHost("[::1]"), true);
  assert.equal(isLoopbackHost("128.0.0.1"), false);
  assert.equal(isLoopbackHost("evil.example"), false);
});
