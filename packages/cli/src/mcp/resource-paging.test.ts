/**
 * Resources listed with paging (issue 27, point 1): a module's resources are merged and served in pages
 * of 100 with an opaque cursor; a client walking the cursors reads every one, once, and a read goes to
 * the module that listed the URI.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { createToolSet, defineTool } from "@tackle/core";
import { z } from "zod";
import { createEmbeddedToolSource } from "../tool-source/create-embedded-tool-source.ts";
import { createMcpServer } from "./create-mcp-server.ts";

const uris = Array.from({ length: 250 }, (_, index) => `notes://note/${String(index).padStart(3, "0")}`);
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
        execute: () => ({ resources: uris.map((uri) => ({ uri, name: uri.slice(-3) })) }),
      }),
      defineTool({
        name: "mcp.read",
        description: "One note",
        input: z.object({ uri: z.string() }),
        execute: ({ uri }) => ({
          contents: [{ uri, mimeType: "text/plain", text: `note ${uri.slice(-3)}` }],
        }),
      }),
    ]),
  },
]);

test("250 resources come in pages of 100, every one once, and each reads from its module", async () => {
  const client = new Client({ name: "paging", version: "1" });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await createMcpServer(source).connect(serverSide);
  await client.connect(clientSide);
  try {
    const sizes: number[] = [];
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.request({
        method: "resources/list",
        params: cursor === undefined ? {} : { cursor },
      });
      sizes.push(page.resources.length);
      seen.push(...page.resources.map((resource) => resource.uri));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    assert.deepEqual(sizes, [100, 100, 50]);
    assert.deepEqual(seen, uris);
    const read = await client.readResource({ uri: "notes://note/249" });
    assert.equal((read.contents[0] as { text?: string }).text, "note 249");
  } finally {
    await client.close();
  }
});
