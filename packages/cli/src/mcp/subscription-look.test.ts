/**
 * A look at subscribed resources' versions lists the modules' resources once for all the connection's
 * URIs, not once per URI (ADR 0274): 1,000 subscriptions cost one listing a second, not 1,000.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { createToolSet, defineTool } from "@tackle/core";
import { z } from "zod";
import { createEmbeddedToolSource } from "../tool-source/create-embedded-tool-source.ts";
import { createMcpServer } from "./create-mcp-server.ts";
import { subscriptionPollMs } from "./register-contributions.ts";

let listings = 0;
let versionAsks = 0;
const source = createEmbeddedToolSource([
  {
    module: "notes",
    errors: [],
    close: () => {},
    toolset: createToolSet([
      defineTool({
        name: "mcp.resources",
        description: "The notes",
        input: z.object({}),
        execute: () => {
          listings += 1;
          return { resourceTemplates: [{ uriTemplate: "notes://note/{id}", name: "note" }] };
        },
      }),
      defineTool({
        name: "mcp.versions",
        description: "Each note's version",
        input: z.object({ uris: z.array(z.string()) }),
        execute: ({ uris }) => {
          versionAsks += 1;
          return { versions: Object.fromEntries(uris.map((uri) => [uri, "v1"])) };
        },
      }),
    ]),
  },
]);

test("1,000 subscriptions are looked at with one listing and one versions ask per look", async () => {
  const client = new Client({ name: "looks", version: "1" });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const server = createMcpServer(source);
  await server.connect(serverSide);
  await client.connect(clientSide);
  try {
    for (let n = 0; n < 1_000; n += 1) await client.subscribeResource({ uri: `notes://note/${n}` });
    listings = 0;
    versionAsks = 0;
    await new Promise((resolve) => setTimeout(resolve, subscriptionPollMs * 2.5));
    assert.ok(versionAsks >= 1 && versionAsks <= 3, `looks: ${versionAsks}`);
    assert.equal(listings, versionAsks, `${listings} listings for ${versionAsks} looks`);
  } finally {
    await client.close();
    await server.close();
  }
});
