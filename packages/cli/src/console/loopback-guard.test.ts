import assert from "node:assert/strict";
import { test } from "node:test";
import { loopbackViolation } from "./loopback-guard.ts";

const check = (headers: Record<string, string>) => loopbackViolation(new Headers(headers));

test("loopback Host names pass, with or without a port, with or without a loopback Origin", () => {
  for (const host of ["127.0.0.1:4270", "localhost:4270", "[::1]:4270", "127.0.0.1", "LOCALHOST"]) {
    assert.equal(check({ host }), undefined, host);
  }
  assert.equal(check({ host: "127.0.0.1:4270", origin: "http://localhost:3000" }), undefined);
  assert.equal(check({ host: "127.0.0.1:4270", origin: "https://[::1]" }), undefined);
});

test("a foreign Host, a missing Host or a foreign or opaque Origin is named as the reason", () => {
  assert.match(check({ host: "evil.example" }) ?? "", /Host "evil\.example" is not loopback/);
  assert.match(check({ host: "127.0.0.1.nip.io:4270" }) ?? "", /not loopback/);
  assert.match(check({}) ?? "", /Host "" is not loopback/);
  assert.match(
    check({ host: "127.0.0.1", origin: "http://evil.example" }) ?? "",
    /Origin "http:\/\/evil\.example"/,
  );
  assert.match(check({ host: "127.0.0.1", origin: "null" }) ?? "", /Origin "null"/);
});
