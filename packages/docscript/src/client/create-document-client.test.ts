import assert from "node:assert/strict";
import { once } from "node:events";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { it } from "node:test";
import { createDocumentClient } from "./create-document-client.ts";
import { DocumentClientError } from "./document-client-error.ts";

/**
 * A raw HTTP/1.1 server keeping connections alive (it advertises 60 s) that, when armed, closes the
 * connection the next request arrives on without a byte of answer: what a server closing an idle
 * kept-alive connection does to a client reusing it at that instant. It closes with a reset and an
 * end by turns. `always`: every request meets a closed connection.
 */
async function closingServer(options: { always?: boolean } = {}) {
  const seen: string[] = [];
  let armed = 0;
  let closes = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    let buffered = Buffer.alloc(0);
    socket.on("error", () => {});
    socket.on("data", (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const end = buffered.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffered.subarray(0, end).toString("latin1");
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        buffered = buffered.subarray(end + 4 + length);
        const [method, path] = head.split(" ");
        seen.push(`${method} ${path}`);
        if (options.always === true || armed > 0) {
          armed = Math.max(0, armed - 1);
          closes += 1;
          if (closes % 2 === 1) socket.resetAndDestroy();
          else socket.end();
          return;
        }
        const body = path?.endsWith("/push") ? JSON.stringify({ status: "committed", version: "v2" }) : "";
        const status = method === "POST" && path === "/documents" ? "201 Created" : "200 OK";
        socket.write(
          `HTTP/1.1 ${status}\r\nconnection: keep-alive\r\nkeep-alive: timeout=60\r\n` +
            `docscript-version: v1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
      }
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    /** Closes the connection of the next request to arrive. */
    closeNext: () => {
      armed += 1;
    },
    close: () => {
      server.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}

it("a kept-alive connection closed as the next request arrives: reads, pushes and creates go through on a new one", async () => {
  const server = await closingServer();
  try {
    const client = createDocumentClient({ origin: server.url, token: "token-0123456789abcdef" });
    assert.equal((await client.pull("doc")).version, "v1");
    // The connection each request below goes out on is closed under it (the one the previous left alive).
    server.closeNext();
    assert.equal((await client.pull("doc")).version, "v1");
    server.closeNext();
    assert.equal((await client.push("doc", new Uint8Array([1, 2, 3]))).status, "committed");
    server.closeNext();
    assert.equal(
      await client.createDocument("other", {
        adminToken: "admin-0123456789abcdef",
        token: "t-0123456789abcdef",
      }),
      true,
    );
    assert.deepEqual(server.seen, [
      "GET /documents/doc/snapshot",
      "GET /documents/doc/snapshot",
      "GET /documents/doc/snapshot",
      "POST /documents/doc/push",
      "POST /documents/doc/push",
      "POST /documents",
      "POST /documents",
    ]);
  } finally {
    server.close();
  }
});

it("a request whose retry is closed too fails as a network error after two attempts", async () => {
  const server = await closingServer({ always: true });
  try {
    const client = createDocumentClient({ origin: server.url, token: "token-0123456789abcdef" });
    await assert.rejects(
      client.pull("doc"),
      (error: unknown) => DocumentClientError.isInstance(error) && error.code === "network_error",
    );
    assert.deepEqual(server.seen, ["GET /documents/doc/snapshot", "GET /documents/doc/snapshot"]);
  } finally {
    server.close();
  }
});
