/**
 * A TCP listener that accepts every connection, reads what comes, and never answers: the server that
 * hangs. Tests of deadlines and aborts use it to see a wait end, and the connection closed after it.
 */
import { once } from "node:events";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

export interface SilentServer {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  readonly port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Connections still open (the client has not closed them). */
  readonly open: number;
  /** Bytes received so far, on every connection. */
  readonly received: number;
  /** Waits (at most `withinMs`, default 2 000) until `accepted` reaches `count`; false if it did not. */
  waitForConnection(count?: number, withinMs?: number): Promise<boolean>;
  /** Waits (at most `withinMs`, default 2 000) until no connection is open; false if one still is. */
  waitForNoneOpen(withinMs?: number): Promise<boolean>;
  close(): Promise<void>;
}

export async function startSilentServer(): Promise<SilentServer> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let received = 0;
  const server = createServer((socket) => {
    accepted += 1;
    sockets.add(socket);
    socket.on("data", (chunk: Buffer) => {
      received += chunk.length;
    });
    socket.on("error", () => undefined);
    socket.on("close", () => sockets.delete(socket));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  const until = async (holds: () => boolean, withinMs: number): Promise<boolean> => {
    const end = performance.now() + withinMs;
    while (!holds()) {
      if (performance.now() > end) return false;
      await sleep(5);
    }
    return true;
  };
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get accepted() {
      return accepted;
    },
    get open() {
      return sockets.size;
    },
    get received() {
      return received;
    },
    waitForConnection: (count = 1, withinMs = 2000) => until(() => accepted >= count, withinMs),
    waitForNoneOpen: (withinMs = 2000) => until(() => sockets.size === 0, withinMs),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
