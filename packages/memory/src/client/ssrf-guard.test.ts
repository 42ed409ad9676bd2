import assert from "node:assert/strict";
import { it } from "node:test";
import { SsrfRefusedError } from "../errors/ssrf-refused-error.ts";
import { guardedLookup, isPrivateAddress } from "./ssrf-guard.ts";

it("classifies private, loopback, link-local and special addresses", () => {
  const refused = [
    "127.0.0.1",
    "10.0.0.1",
    "172.16.5.4",
    "172.31.255.255",
    "192.168.0.10",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "::",
    "::1",
    "fc00::1",
    "fd12:3456::1",
    "fe80::1",
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "64:ff9b::a00:1",
    "not-an-ip",
  ];
  const allowed = ["8.8.8.8", "172.32.0.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"];
  for (const address of refused) assert.equal(isPrivateAddress(address), true, address);
  for (const address of allowed) assert.equal(isPrivateAddress(address), false, address);
});

it("refuses a host name that resolves to a private address, at connect time", async () => {
  const lookup = guardedLookup("http://localhost");
  const error = await new Promise<unknown>((resolve) =>
    lookup("localhost", {}, (failure) => resolve(failure)),
  );
  assert.ok(SsrfRefusedError.isInstance(error));
  assert.match((error as Error).message, /resolves to/);
});
