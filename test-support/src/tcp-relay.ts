/**
 * A TCP relay in front of a real server (an HTTP service, PostgreSQL) that a test can break on purpose:
 * lose the answer to the next request (or the next one that matches, a `COMMIT`) after the server
 * received it, cut every open connection, or take the network down.
 */
import { once } from "node:events";
import { type AddressInfo, createServer, type Socket, connect as tcpConnect } from "node:net";

export interface TcpRelay {
  /** The target's URL with the relay's host and port (user, database and path kept). */
  readonly url: string;
  readonly port: number;
  /** The HTTP request lines that went through (`POST /v1/memories`), in order. */
  readonly requests: readonly string[];
  /** How many answers were lost so far. */
  readonly resets: number;
  /**
   * Passes the next request on whole and resets the client's connection (TCP RST) as the server's
   * answer starts to come back: the server did the work, the client never hears of it.
   */
  loseNextAnswer(): void;
  /**
   * Loses the answer to the next request whose bytes match: the first chunk a client sends that
   * `match` accepts (read as latin1 text: for PostgreSQL, the SQL of a query message, `COMMIT` for
   * one) is passed on whole, and that one connection is reset as the server's answer starts to come
   * back. The server did the work (committed the transaction); the client hears a reset. Other
   * connections are untouched. Each call arms one loss; calls add up.
   */
  loseAnswerTo(match: RegExp | ((text: string) => boolean)): void;
  /** Drops every open connection (the server restarted, a network path failed); new ones are taken. */
  cut(): void;
  /** Connections open through the relay now. */
  readonly connections: number;
  /** Drops every connection and refuses new ones until `up()`. */
  down(): void;
  up(): void;
  close(): Promise<void>;
}

export async function startTcpRelay(target: string | URL): Promise<TcpRelay> {
  const targetUrl = new URL(target);
  const defaultPort = targetUrl.protocol.startsWith("postgres") ? 5432 : 80;
  const targetPort = Number(targetUrl.port || defaultPort);
  const sockets = new Set<Socket>();
  const requests: string[] = [];
  let armed = false;
  let resets = 0;
  let isDown = false;
  const matchers: ((text: string) => boolean)[] = [];
  const clients = new Set<Socket>();
  const server = createServer((client) => {
    if (isDown) {
      client.destroy();
      return;
    }
    clients.add(client);
    client.on("close", () => clients.delete(client));
    // Set when a matched request of this connection went through: its answer is lost.
    let answerLost = false;
    const upstream = tcpConnect(targetPort, targetUrl.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on("data", (chunk: Buffer) => {
      const line = /^(GET|POST|PUT|PATCH|DELETE) (\S+) HTTP\//m.exec(chunk.toString("latin1"));
      if (line !== null) requests.push(`${line[1]} ${line[2]}`);
      if (!answerLost && matchers.length > 0) {
        const text = chunk.toString("latin1");
        const at = matchers.findIndex((match) => match(text));
        if (at >= 0) {
          matchers.splice(at, 1);
          answerLost = true;
        }
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (armed || answerLost) {
        if (answerLost) answerLost = false;
        else armed = false;
        resets += 1;
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    client.on("end", () => upstream.end());
    upstream.on("end", () => client.end());
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  const relayed = new URL(targetUrl);
  relayed.hostname = "127.0.0.1";
  relayed.port = String(port);
  // `new URL("http://h:1")` prints a trailing slash the caller did not write; keep their form.
  const url = String(target).endsWith("/") ? relayed.toString() : relayed.toString().replace(/\/$/, "");
  const dropAll = () => {
    for (const socket of sockets) socket.destroy();
  };
  return {
    url,
    port,
    requests,
    get resets() {
      return resets;
    },
    loseNextAnswer() {
      armed = true;
    },
    loseAnswerTo(match) {
      matchers.push(typeof match === "function" ? match : (text) => match.test(text));
    },
    cut: dropAll,
    get connections() {
      return clients.size;
    },
    down() {
      isDown = true;
      dropAll();
    },
    up() {
      isDown = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        dropAll();
        server.close(() => resolve());
      }),
  };
}
