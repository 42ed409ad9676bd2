/**
 * One raw HTTP/1.1 connection kept alive across requests, for tests of a server's idle-connection
 * handling: `ask` writes a request on the same socket and waits (at most 5 s) for its answer;
 * `closed` says whether the server has closed the connection.
 */
import { once } from "node:events";
import { connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

export interface KeptAliveSocket {
  /** Sends `GET path` with the given extra header lines; resolves with the raw answer once `answered` holds. */
  ask(path: string, options?: { headers?: string; answered?: (answer: string) => boolean }): Promise<string>;
  readonly closed: boolean;
  destroy(): void;
}

export async function openKeptAliveSocket(url: string): Promise<KeptAliveSocket> {
  const { port } = new URL(url);
  const socket = connect(Number(port), "127.0.0.1");
  await once(socket, "connect");
  let received = "";
  let closed = false;
  socket.setEncoding("latin1").on("data", (chunk: string) => {
    received += chunk;
  });
  socket.on("close", () => {
    closed = true;
  });
  return {
    async ask(path, { headers = "", answered = (answer: string) => answer.includes("\r\n\r\n") } = {}) {
      const from = received.length;
      socket.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n${headers}\r\n`);
      for (let waited = 0; !answered(received.slice(from)) && waited < 5000; waited += 10) await sleep(10);
      return received.slice(from);
    },
    get closed() {
      return closed;
    },
    destroy: () => socket.destroy(),
  };
}
