/**
 * `MemoryClient`'s `apiKey` and `headers` go out on every call: one a header cannot carry (a line break,
 * a character past U+00FF, a name that is not an HTTP token) is refused when the client is made, with
 * the service's typed `invalid_input` naming the header and never echoing the value (it may be the key).
 * Before, the client was made and every call failed with `node:http`'s untyped `TypeError`.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { MemoryClient, type MemoryClientOptions, MemoryError } from "@tackle/memory";
import { type MemoryServer, serveMemory } from "@tackle/memory/server";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-header-values-"));
let server: MemoryServer;
before(async () => {
  server = await serveMemory({ store: join(directory, "memory.db"), apiKeys: { k: "t" }, port: 0 });
});
after(async () => {
  await server.close();
  rmSync(directory, { recursive: true, force: true });
});

const make = (options: MemoryClientOptions) =>
  new MemoryClient({ baseUrl: server.url, allowPrivateNetwork: true, ...options });

function refused(header: string, option: "apiKey" | "headers", secret: string) {
  return (error: unknown) => {
    assert.ok(MemoryError.isInstance(error), `${header}: ${String(error)}`);
    assert.equal(error.code, "invalid_input");
    assert.equal(error.status, 400);
    assert.ok(error.message.includes(`"${header}" header (${option})`), error.message);
    assert.ok(!error.message.includes(secret), `the value is not echoed: ${error.message}`);
    assert.ok(!JSON.stringify(error.data).includes(secret), "nor in the data");
    return true;
  };
}

it("an apiKey a header cannot carry is refused at construction, naming Authorization", () => {
  for (const apiKey of ["k\r\nx-tenant: other", "k\n", "ключ-k", "k\u0000"]) {
    assert.throws(() => make({ apiKey }), refused("Authorization", "apiKey", apiKey));
  }
});

it("TACKLE_MEMORY_API_KEY with a line break is refused the same way", () => {
  const saved = process.env.TACKLE_MEMORY_API_KEY;
  process.env.TACKLE_MEMORY_API_KEY = "k-from-env\n";
  try {
    assert.throws(() => make({}), refused("Authorization", "apiKey", "k-from-env"));
  } finally {
    if (saved === undefined) delete process.env.TACKLE_MEMORY_API_KEY;
    else process.env.TACKLE_MEMORY_API_KEY = saved;
  }
});

it("a header value or name a header cannot carry is refused at construction, naming the header", () => {
  const cases: [Record<string, string>, string, string][] = [
    [{ "x-trace": "a\r\nx-tenant: other" }, "x-trace", "x-tenant: other"],
    [{ "x-note": "über ключ" }, "x-note", "ключ"],
    [{ "x bad": "v" }, "x bad", "\u0000never"],
    [{ "x-ok": "fine", "x-tab\n": "v" }, "x-tab\\n", "\u0000never"],
  ];
  for (const [headers, name, secret] of cases) {
    assert.throws(() => make({ apiKey: "k", headers }), refused(name, "headers", secret));
  }
});

it("values a header can carry still reach the service (Latin-1 and tabs included)", async () => {
  const client = make({ apiKey: "k", headers: { "x-note": "café\tau lait" } });
  const { memory } = await client.add({ userId: "u", content: "I live in Porto" });
  assert.equal(memory.content, "I live in Porto");
});
