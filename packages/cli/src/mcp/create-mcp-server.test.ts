/**
 * The log level a client asks for, as the MCP server of the console and of `tackle mcp` keeps it: a
 * 2025 client's `logging/setLevel` holds for its own connection's later calls (the server answers it
 * with its own handler, so an SDK that kept its levels elsewhere would still be obeyed); a 2026-07-28
 * request's level is its own. The source is told the tool logger's level, and lines below the
 * client's level never reach it.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client, LOG_LEVEL_META_KEY, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createMcpHandler, InMemoryTransport } from "@modelcontextprotocol/server";
import { createToolSet, defineTool } from "@tackle/core";
import { z } from "zod";
import { createEmbeddedToolSource } from "../tool-source/create-embedded-tool-source.ts";
import type { SourceCallOptions, ToolSource } from "../tool-source/tool-source.ts";
import { createMcpServer } from "./create-mcp-server.ts";

const chatty = defineTool({
  name: "chatty",
  description: "One log line at each level",
  input: z.object({}),
  execute: (_input, context) => {
    context.logger.debug("d");
    context.logger.info("i", { n: 1 });
    context.logger.warn("w");
    context.logger.error("e");
    return { done: true };
  },
});

/** An in-process source that records the log level each call was asked for. */
function recordingSource(): { source: ToolSource; levels: SourceCallOptions["logLevel"][] } {
  const inner = createEmbeddedToolSource([
    { module: "talk", toolset: createToolSet([chatty]), errors: [], close: () => {} },
  ]);
  const levels: SourceCallOptions["logLevel"][] = [];
  return {
    levels,
    source: {
      ...inner,
      call: (name, args, options) => {
        levels.push(options?.logLevel);
        return inner.call(name, args, options);
      },
    },
  };
}

/**
 * A client of a server over `source`: a 2025 client on one connection (as `tackle mcp` and a console
 * session serve it); a 2026-07-28 client through the SDK's HTTP handler, a server per request (as the
 * console serves it), fetched in process.
 */
async function connect(
  source: ToolSource,
  mode: "legacy" | { pin: "2026-07-28" },
): Promise<{ client: Client; levels: () => string[] }> {
  const client = new Client({ name: "levels", version: "1" }, { versionNegotiation: { mode } });
  const received: string[] = [];
  client.setNotificationHandler("notifications/message", (notification) => {
    received.push(notification.params.level);
  });
  if (mode === "legacy") {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await createMcpServer(source).connect(serverSide);
    await client.connect(clientSide);
  } else {
    const handler = createMcpHandler(() => createMcpServer(source));
    await client.connect(
      new StreamableHTTPClientTransport(new URL("http://127.0.0.1/mcp"), {
        fetch: (url, init) => handler.fetch(new Request(url, init)),
      }),
    );
  }
  return {
    client,
    // Every line comes before the result (the SDK hands notifications on a microtask later).
    levels: () => received.splice(0),
  };
}

test("a 2025 client's logging/setLevel holds for its connection's later calls, and for no other connection", async () => {
  const { source, levels: asked } = recordingSource();
  const first = await connect(source, "legacy");
  const second = await connect(source, "legacy");
  try {
    const call = async (client: Client) => {
      const result = await client.callTool({ name: "talk.chatty", arguments: {} });
      assert.deepEqual(result.structuredContent, { done: true });
      await new Promise((resolve) => setImmediate(resolve));
    };

    // No level set: every line (the SDK's default for a 2025 client); the source is asked for none.
    await call(first.client);
    assert.deepEqual(first.levels(), ["debug", "info", "warning", "error"]);
    assert.deepEqual(asked.splice(0), [undefined]);

    await first.client.setLoggingLevel("warning");
    await call(first.client);
    assert.deepEqual(first.levels(), ["warning", "error"]);
    assert.deepEqual(asked.splice(0), ["warn"]);

    // The other connection's level is its own.
    await second.client.setLoggingLevel("info");
    await call(second.client);
    assert.deepEqual(second.levels(), ["info", "warning", "error"]);
    assert.deepEqual(asked.splice(0), ["info"]);
    await call(first.client);
    assert.deepEqual(first.levels(), ["warning", "error"]);
    assert.deepEqual(asked.splice(0), ["warn"]);

    // Above every line the tool can write: none, and the source is asked for none.
    await first.client.setLoggingLevel("critical");
    await call(first.client);
    assert.deepEqual(first.levels(), []);
    assert.deepEqual(asked.splice(0), [undefined]);

    await first.client.setLoggingLevel("debug");
    await call(first.client);
    assert.deepEqual(first.levels(), ["debug", "info", "warning", "error"]);
    assert.deepEqual(asked.splice(0), ["debug"]);
  } finally {
    await first.client.close();
    await second.client.close();
  }
});

test("a 2026-07-28 request's own level decides its lines; without one it gets none", async () => {
  const { source, levels: asked } = recordingSource();
  const { client, levels } = await connect(source, { pin: "2026-07-28" });
  try {
    const call = async (meta: Record<string, unknown> | undefined) => {
      const result = await client.callTool({
        name: "talk.chatty",
        arguments: {},
        ...(meta === undefined ? {} : { _meta: meta }),
      });
      assert.deepEqual(result.structuredContent, { done: true });
      await new Promise((resolve) => setImmediate(resolve));
    };
    await call({ [LOG_LEVEL_META_KEY]: "notice" });
    assert.deepEqual(levels(), ["warning", "error"]);
    assert.deepEqual(asked.splice(0), ["warn"]);
    await call(undefined);
    assert.deepEqual(levels(), []);
    assert.deepEqual(asked.splice(0), [undefined]);
  } finally {
    await client.close();
  }
});
