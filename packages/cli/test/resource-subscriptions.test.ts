/**
 * What a client's subscriptions cost `tackle mcp --builtin` (a real child over stdio, the SDK's client;
 * ADR 0274): a URI no module holds — an inherited property name, another scheme — is refused as
 * `resources/read` refuses it, and one connection holds at most 1,000 subscriptions at once.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { cleanEnv, mainScript, tempHome } from "./tackle-process.ts";

const home = tempHome();
let client: Client;

before(async () => {
  client = new Client({ name: "resource-subscriptions", version: "1.0.0" });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: ["--conditions=@tackle/source", mainScript, "mcp", "--builtin"],
      env: cleanEnv({ TACKLE_HOME: home.path, TACKLE_LOG_LEVEL: "silent" }) as Record<string, string>,
      stderr: "pipe",
    }),
  );
});

after(async () => {
  await client?.close();
  home.remove();
});

test("a subscription to a URI no module holds is refused, as reading it is", async () => {
  for (const uri of ["__proto__", "constructor", "toString", "memory://__proto__", "file:///etc/passwd"]) {
    await assert.rejects(client.subscribeResource({ uri }), /Resource not found/, uri);
    await assert.rejects(client.readResource({ uri }), /Resource not found/, uri);
  }
  // A template's match is held, whatever its value: a user named `__proto__` is a user.
  assert.deepEqual(await client.subscribeResource({ uri: "memory://users/__proto__" }), {});
  await client.unsubscribeResource({ uri: "memory://users/__proto__" });
});

test("one connection holds at most 1,000 subscriptions; past it one is refused until another ends", async () => {
  const uris = Array.from({ length: 1_000 }, (_, n) => `memory://users/u${n}`);
  for (let start = 0; start < uris.length; start += 100) {
    await Promise.all(uris.slice(start, start + 100).map((uri) => client.subscribeResource({ uri })));
  }
  await assert.rejects(
    client.subscribeResource({ uri: "memory://users/one-too-many" }),
    /At most 1000 resource subscriptions per connection/,
  );
  // Subscribing again to a held URI is no new subscription.
  assert.deepEqual(await client.subscribeResource({ uri: "memory://users/u0" }), {});
  await client.unsubscribeResource({ uri: "memory://users/u0" });
  assert.deepEqual(await client.subscribeResource({ uri: "memory://users/one-too-many" }), {});
});
