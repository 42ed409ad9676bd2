import assert from "node:assert/strict";
import { it } from "node:test";
import { isLoopbackHost, loopbackViolation } from "./loopback.ts";

it("knows loopback addresses and refuses DNS names that merely look like them", () => {
  for (const host of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"]) {
    assert.equal(isLoopbackHost(host), true, host);
  }
  for (const host of [
    "0.0.0.0",
    "10.0.0.1",
    "127.attacker.example",
    "localhost.evil",
    "::",
    "evil.example",
  ]) {
    assert.equal(isLoopbackHost(host), false, host);
  }
});

it("refuses a foreign Host or Origin and passes loopback ones", () => {
  const check = (host: string | undefined, origin?: string) => {
    const headers = new Headers();
    if (host !== undefined) headers.set("host", host);
    if (origin !== undefined) headers.set("origin", origin);
    return loopbackViolation(headers);
  };
  assert.equal(check("127.0.0.1:4270"), undefined);
  assert.equal(check("[::1]:80", "http://localhost:3000"), undefined);
  assert.match(check("evil.example:4270") ?? "", /Host "evil.example:4270" is not loopback/);
  assert.match(check("127.0.0.1.nip.io:4270") ?? "", /not loopback/);
  assert.match(check("127.0.0.1:4270", "http://evil.example") ?? "", /Origin "http:\/\/evil.example"/);
  assert.match(check("127.0.0.1", "null") ?? "", /not a loopback origin/);
  assert.match(check(undefined) ?? "", /Host "" is not loopback/);
});
