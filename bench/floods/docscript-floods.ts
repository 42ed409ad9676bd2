/**
 * docscript floods (ADR 0552), over real HTTP (`serveDocuments`) on a SQLite file, one document's token:
 * many snapshot answers asked and never read (`maxUnsentBytes`), and many large pushes in flight at once,
 * each sent all but its last byte (`maxBodyBytes`).
 */
import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { createDocumentClient, openDocument, timelineSchema } from "@tackle/docscript";
import {
  createSqliteDocumentStore,
  type RunningDocumentServer,
  serveDocuments,
} from "@tackle/docscript/server";
import { LoroDoc } from "loro-crdt";
import { sampleTimelineSnapshot } from "../../packages/docscript/src/module/sample-timeline.ts";
import {
  countRefusal,
  errorCode,
  type FloodRow,
  measured,
  mib,
  rest,
  sleep,
  sqliteBytes,
  type Variant,
} from "./measure.ts";

const token = "token-flood-0123456789abcdef";

/** A raw HTTP exchange on its own connection: the answer's first bytes, kept until its status is known. */
interface Exchange {
  readonly socket: Socket;
  /** The answer's head (and a small answer's body); empty until the server answers. */
  answer: string;
}

/** The answer's status and code, or undefined while the server has not answered. */
function verdict(exchange: Exchange): [number, string | undefined] | undefined {
  const status = /^HTTP\/1\.1 (\d{3})/.exec(exchange.answer);
  if (status === null) return undefined;
  const body = exchange.answer.slice(exchange.answer.indexOf("\r\n\r\n") + 4);
  return [Number(status[1]), errorCode(body)];
}

function open(url: string, request: string, readAll: boolean): Exchange {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  const exchange: Exchange = { socket, answer: "" };
  socket.on("error", () => undefined);
  const onData = (chunk: Buffer) => {
    exchange.answer += chunk.toString("latin1", 0, Math.min(chunk.length, 4096));
    // A reader that never reads: once its answer is known to be a success, it takes nothing more.
    if (!readAll && verdict(exchange)?.[0] === 200) {
      socket.off("data", onData);
      socket.pause();
    }
  };
  socket.on("data", onData);
  socket.write(request);
  return exchange;
}

/** Tallies the exchanges' answers; those not answered yet are returned as `waiting`. */
function tally(
  exchanges: readonly Exchange[],
  refused: Record<string, number>,
): { accepted: number; waiting: number } {
  let accepted = 0;
  let waiting = 0;
  for (const exchange of exchanges) {
    const seen = verdict(exchange);
    if (seen === undefined) waiting++;
    else if (seen[0] === 200) accepted++;
    else countRefusal(refused, seen[0], seen[1]);
  }
  return { accepted, waiting };
}

/** A document of the sample timeline with a large value in `meta`: its snapshot is several MB. */
function largeSnapshot(): Uint8Array {
  const doc = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
  doc.getMap("meta").set("ballast", randomBytes(3_000_000).toString("base64"));
  doc.commit();
  return doc.export({ mode: "snapshot" });
}

async function waitAnswered(
  exchanges: readonly Exchange[],
  done: (exchange: Exchange) => boolean,
  ms: number,
) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && !exchanges.every(done)) await sleep(50);
}

/** Readers asking the document's snapshot, five every 100 ms, and reading none of it. */
export async function unreadFlood(variant: Variant, scale: number, directory: string): Promise<FloodRow> {
  const readers = Math.round(80 * scale);
  const path = join(directory, "documents.sqlite");
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path }),
    schema: timelineSchema,
    ...(variant === "bounded" ? {} : { maxUnsentBytes: Number.POSITIVE_INFINITY }),
  });
  const exchanges: Exchange[] = [];
  try {
    const snapshot = largeSnapshot();
    await server.host.create("doc", token, snapshot);
    // One read first: the document open, its first snapshot made and read.
    const first = await fetch(`${server.url}/documents/doc/snapshot`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const answerBytes = (await first.arrayBuffer()).byteLength;
    const request = `GET /documents/doc/snapshot HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`;
    const result = await measured(async () => {
      for (let index = 0; index < readers; index++) {
        exchanges.push(open(server.url, request, false));
        if (index % 5 === 4) await sleep(100);
      }
      await waitAnswered(exchanges, (exchange) => verdict(exchange) !== undefined, 20_000);
      await sleep(1_000);
    });
    const refused: Record<string, number> = {};
    const { accepted, waiting } = tally(exchanges, refused);
    return {
      flood: "docscript: unread answers",
      workload: `${readers} connections of one token asking a ${mib(answerBytes)} MiB snapshot, reading none`,
      service:
        variant === "bounded"
          ? "bounded (maxUnsentBytes 64 MiB, default)"
          : "unbounded (maxUnsentBytes: Infinity)",
      accepted,
      refused,
      ...rest(result),
      notes: `${waiting} not answered after 20 s; a token's 64 places (maxInFlight) hold in both`,
    };
  } finally {
    for (const exchange of exchanges) exchange.socket.destroy();
    await server.close();
  }
}

/** A small push through the package's client: the document open and its replica made, as before any flood. */
async function pushTrack(server: RunningDocumentServer): Promise<void> {
  const client = createDocumentClient({ origin: server.url, token, maxRetries: 0 });
  const doc = new LoroDoc();
  await client.pullInto("doc", doc);
  const before = doc.oplogVersion();
  openDocument(doc, timelineSchema).entities.create({ entityKind: "track", payload: { role: "bgm" } });
  doc.commit();
  const result = await client.push("doc", doc.export({ mode: "update", from: before }));
  if (result.status !== "committed") throw new Error(`the first push was ${result.status}`);
}

/** Pushes of 14 MiB declared, each sent all but its last byte, at once: bodies the server holds in flight. */
export async function pushesFlood(variant: Variant, scale: number, directory: string): Promise<FloodRow> {
  const pushes = Math.round(24 * scale);
  const bodyLength = 14 * 1024 * 1024;
  const path = join(directory, "documents.sqlite");
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path }),
    schema: timelineSchema,
    ...(variant === "bounded" ? {} : { maxBodyBytes: Number.POSITIVE_INFINITY }),
  });
  const exchanges: Exchange[] = [];
  try {
    await server.host.create("doc", token);
    await pushTrack(server);
    const body = Buffer.alloc(bodyLength, 7).subarray(0, bodyLength - 1);
    const head =
      `POST /documents/doc/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/octet-stream\r\nContent-Length: ${bodyLength}\r\n\r\n`;
    const result = await measured(async () => {
      for (let index = 0; index < pushes; index++) {
        const exchange = open(server.url, head, true);
        exchange.socket.write(body);
        exchanges.push(exchange);
      }
      // Every body either refused or sent (all but its last byte) and taken by the server.
      await waitAnswered(
        exchanges,
        (exchange) => verdict(exchange) !== undefined || exchange.socket.writableLength === 0,
        30_000,
      );
      await sleep(1_000);
    });
    const refused: Record<string, number> = {};
    const { accepted, waiting } = tally(exchanges, refused);
    return {
      flood: "docscript: pushes in flight",
      workload: `${pushes} pushes of one token declaring 14 MiB, each sent but its last byte, at once`,
      service:
        variant === "bounded"
          ? "bounded (maxBodyBytes 64 MiB, default)"
          : "unbounded (maxBodyBytes: Infinity)",
      accepted: accepted + waiting,
      refused,
      storedBytes: sqliteBytes(path),
      ...rest(result),
      notes: `${waiting} bodies held unanswered (awaiting their last byte)`,
    };
  } finally {
    for (const exchange of exchanges) exchange.socket.destroy();
    await server.close();
  }
}
