/** A real HTTP server that misbehaves on purpose: scripted answers, and optional forwarding. */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface FlakyServer {
  readonly url: string;
  readonly requests: { method: string; path: string; body: string }[];
  close(): Promise<void>;
}

export type FlakyHandler = (
  request: { method: string; path: string; body: string; headers: IncomingMessage["headers"] },
  response: ServerResponse,
  index: number,
) => void | Promise<void>;

export async function startFlakyServer(handler: FlakyHandler): Promise<FlakyServer> {
  const requests: FlakyServer["requests"] = [];
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const entry = {
      method: request.method ?? "GET",
      path: request.url ?? "/",
      body: Buffer.concat(chunks).toString(),
    };
    requests.push(entry);
    await handler({ ...entry, headers: request.headers }, response, requests.length - 1);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function json(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  response.writeHead(status, { "content-type": "application/json", ...headers });
  response.end(JSON.stringify(body));
}
