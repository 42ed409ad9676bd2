import assert from "node:assert/strict";
import { once } from "node:events";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { it } from "node:test";
import { createDurableClient } from "./create-durable-client.ts";

/**
 * A raw HTTP/1.1 server keeping connections alive that, when armed, resets the connection the next
 * request arrives on without a byte of answer: what a server closing an idle kept-alive connection does
 * to a client reusing it at that instant.
 */
async function closingServer() {
  const seen: string[] = [];
  let armed = false;
  const sockets = new Set<Socket>();
  const server = createServer((socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    let buffered = "";
    socket.setEncoding("latin1").on("data", (chunk: string) => {
      buffered += chunk;
      for (;;) {
        const end = buffered.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffered.slice(0, end);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        buffered = buffered.slice(end + 4 + length);
        const [method, path] = head.split(" ");
        seen.push(`${method} ${path}`);
        if (armed) {
          armed = false;
          socket.resetAndDestroy();
          return;
        }
        const body = JSON.stringify({ threadId: "t1", runId: "r1", status: "paused" });
        socket.write(
          `HTTP/1.1 200 OK\r\nconnection: keep-alive\r\nkeep-alive: timeout=60\r\n` +
            `content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
        );
      }
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    closeNext: () => {
      armed = true;
    },
    close: () => {
      server.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}

it("a read whose kept-alive connection is reset before any answer is sent once more; a start is not", async () => {
  const server = await closingServer();
  try {
    const client = createDurableClient({ baseUrl: server.url });
    assert.equal((await client.get("t1")).threadId, "t1");
    server.closeNext();
    assert.equal((await client.get("t1")).threadId, "t1");
    server.closeNext();
    await assert.rejects(client.start("refund", { id: "o1" }), /fetch failed/);
    assert.deepEqual(server.seen, ["GET /runs/t1", "GET /runs/t1", "GET /runs/t1", "POST /runs"]);
  } finally {
    server.close();
  }
});
