import assert from "node:assert/strict";
import { test } from "node:test";
import { CliError } from "../program/cli-error.ts";
import { parseConsoleUrl } from "./parse-console-url.ts";

test("a loopback console URL is accepted, a bare origin pointing at /mcp", () => {
  assert.equal(parseConsoleUrl("http://127.0.0.1:4270/mcp").href, "http://127.0.0.1:4270/mcp");
  assert.equal(parseConsoleUrl("http://localhost:4270").href, "http://localhost:4270/mcp");
  assert.equal(parseConsoleUrl("http://[::1]:4270/").href, "http://[::1]:4270/mcp");
});

test("a console URL off loopback is refused before the token could be sent to it", () => {
  for (const value of [
    "http://192.0.2.1:4270/mcp",
    "http://console.example/mcp",
    "http://localhost.evil.example:4270/mcp",
    "http://127.0.0.1.nip.io:4270/mcp",
    "http://[::]:4270/mcp",
  ]) {
    assert.throws(
      () => parseConsoleUrl(value),
      (error: unknown) =>
        CliError.isInstance(error) &&
        error.code === "not_loopback" &&
        error.exitCode === 2 &&
        error.message.includes("loopback only"),
      value,
    );
  }
});

test("something that is not an http URL is refused as bad usage", () => {
  for (const value of ["127.0.0.1:4270", "not a url", "file:///etc/passwd", "ws://127.0.0.1:4270/mcp"]) {
    assert.throws(
      () => parseConsoleUrl(value),
      (error: unknown) =>
        CliError.isInstance(error) && error.code === "invalid_arguments" && error.exitCode === 2,
      value,
    );
  }
});
