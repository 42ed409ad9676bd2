/**
 * A TCP relay in front of a real server (an HTTP service, PostgreSQL) that a test can break on purpose:
 * lose the answer to the next request (or the next one that matches, a `COMMIT`) after the server
 * received it, cut every open connection, take the network down, or stall it (a half-open network:
 * nothing closes, nothing gets through).
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
  /**
   * A network that silently stops delivering (a NAT or firewall that dropped its state, a host that
   * vanished): open connections stay open but no byte gets through either way, and new connections
   * are accepted and get no byte through either (a connect that hangs). Nothing is reset: what each
   * side sends, and a side's close, is held in order until `unstall()`, as TCP retransmits across a
   * partition that heals; `cut()` or `down()` while stalled drops the connections and what they held.
   */
  stall(): void;
  /** Ends a stall: what each connection held is delivered in order (closes too), and bytes flow again. */
  unstall(): void;
  /** True while stalled. */
  readonly stalled: boolean;
  close(): Promise<void>;
}

interface RelayState {
  readonly sockets: Set<Socket>;
  readonly clients: Set<Socket>;
  readonly requests: string[];
  readonly matchers: ((text: string) => boolean)[];
  armed: boolean;
  resets: number;
  isDown: boolean;
  stalled: boolean;
  /** What connections sent while stalled, delivered in order by `unstall()`. */
  held: (() => void)[];
}

/** Relays one accepted connection to the target under the relay's faults. */
function relayConnection(state: RelayState, client: Socket, targetPort: number, targetHost: string): void {
  if (state.isDown) {
    client.destroy();
    return;
  }
  /** Runs `deliver` now, or on `unstall()` while stalled. */
  const pass = (deliver: () => void) => {
    if (state.stalled) state.held.push(deliver);
    else deliver();
  };
  state.clients.add(client);
  client.on("close", () => state.clients.delete(client));
  // Set when a matched request of this connection went through: its answer is lost.
  let answerLost = false;
  const upstream = tcpConnect(targetPort, targetHost);
  for (const socket of [client, upstream]) {
    state.sockets.add(socket);
    socket.on("close", () => state.sockets.delete(socket));
    // A side that failed or closed ends the other; while stalled, only once the network heals.
    const dropBoth = () =>
      pass(() => {
        client.destroy();
        upstream.destroy();
      });
    socket.on("error", dropBoth);
    socket.on("close", dropBoth);
  }
  const fromClient = (chunk: Buffer) => {
    if (upstream.destroyed) return;
    const line = /^(GET|POST|PUT|PATCH|DELETE) (\S+) HTTP\//m.exec(chunk.toString("latin1"));
    if (line !== null) state.requests.push(`${line[1]} ${line[2]}`);
    if (!answerLost && state.matchers.length > 0) {
      const text = chunk.toString("latin1");
      const at = state.matchers.findIndex((match) => match(text));
      if (at >= 0) {
        state.matchers.splice(at, 1);
        answerLost = true;
      }
    }
    upstream.write(chunk);
  };
  const fromServer = (chunk: Buffer) => {
    if (client.destroyed) return;
    if (state.armed || answerLost) {
      if (answerLost) answerLost = false;
      else state.armed = false;
      state.resets += 1;
      client.resetAndDestroy();
      upstream.destroy();
      return;
    }
    client.write(chunk);
  };
  client.on("data", (chunk: Buffer) => pass(() => fromClient(chunk)));
  upstream.on("data", (chunk: Buffer) => pass(() => fromServer(chunk)));
  client.on("end", () => pass(() => upstream.end()));
  upstream.on("end", () => pass(() => client.end()));
}

export async function startTcpRelay(target: string | URL): Promise<TcpRelay> {
  const targetUrl = new URL(target);
  const defaultPort = targetUrl.protocol.startsWith("postgres") ? 5432 : 80;
  const targetPort = Number(targetUrl.port || defaultPort);
  const state: RelayState = {
    sockets: new Set(),
    clients: new Set(),
    requests: [],
    matchers: [],
    armed: false,
    resets: 0,
    isDown: false,
    stalled: false,
    held: [],
  };
  const server = createServer((client) => relayConnection(state, client, targetPort, targetUrl.hostname));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  const relayed = new URL(targetUrl);
  relayed.hostname = "127.0.0.1";
  relayed.port = String(port);
  // `new URL("http://h:1")` prints a trailing slash the caller did not write; keep their form.
  const url = String(target).endsWith("/") ? relayed.toString() : relayed.toString().replace(/\/$/, "");
  const dropAll = () => {
    state.held = [];
    for (const socket of state.sockets) socket.destroy();
  };
  return {
    url,
    port,
    requests: state.requests,
    get resets() {
      return state.resets;
    },
    loseNextAnswer() {
      state.armed = true;
    },
    loseAnswerTo(match) {
      state.matchers.push(typeof match === "function" ? match : (text) => match.test(text));
    },
    cut: dropAll,
    get connections() {
      return state.clients.size;
    },
    down() {
      state.isDown = true;
      dropAll();
    },
    up() {
      state.isDown = false;
    },
    stall() {
      state.stalled = true;
    },
    unstall() {
      state.stalled = false;
      const delivering = state.held;
      state.held = [];
      for (const deliver of delivering) deliver();
    },
    get stalled() {
      return state.stalled;
    },
    close: () =>
      new Promise<void>((resolve) => {
        dropAll();
        server.close(() => resolve());
      }),
  };
}
