/**
 * A loopback HTTP front for the public MCP conformance suite, which can send neither a bearer token
 * nor our `module.name` names: it adds the console's token to every request, and maps the suite's
 * fixed tool and prompt names (`test_simple_text`, `json_schema_2020_12_tool`, `test_simple_prompt`)
 * to the fixture module's (`test.simple_text`, `test.json_schema_2020_12_tool`, `test.simple_prompt`)
 * in requests (tools/call, prompts/get, a prompt's completion) and back in replies. Everything else,
 * the Host and Origin headers included, passes through untouched.
 */
import { once } from "node:events";
import { createServer, request as httpRequest, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

export interface SuiteProxy {
  readonly url: string;
  close(): Promise<void>;
}

/** Suite name → console name. */
export function consoleName(suiteName: string): string {
  return suiteName.startsWith("test_") ? `test.${suiteName.slice(5)}` : `test.${suiteName}`;
}

export function toSuite(text: string): string {
  return text.replace(/"name":"test\.([A-Za-z0-9_]+)"/g, (_match, tool: string) =>
    tool === "json_schema_2020_12_tool" ? `"name":"${tool}"` : `"name":"test_${tool}"`,
  );
}

export function toConsole(body: string): string {
  if (body === "") return body;
  try {
    const parsed = JSON.parse(body) as unknown;
    const messages = Array.isArray(parsed) ? parsed : [parsed];
    for (const message of messages as {
      method?: string;
      params?: { name?: string; ref?: { type?: string; name?: string } };
    }[]) {
      const named = message?.method === "tools/call" || message?.method === "prompts/get";
      if (named && typeof message.params?.name === "string") {
        message.params.name = consoleName(message.params.name);
      }
      const ref = message?.method === "completion/complete" ? message.params?.ref : undefined;
      if (ref?.type === "ref/prompt" && typeof ref.name === "string") ref.name = consoleName(ref.name);
    }
    return JSON.stringify(parsed);
  } catch {
    return body; // not JSON: the server judges it
  }
}

async function readAll(stream: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export async function startSuiteProxy(target: string, token: string | undefined): Promise<SuiteProxy> {
  const upstream = new URL(target);
  const server = createServer(async (request, response) => {
    const body = toConsole(await readAll(request));
    const headers = { ...request.headers };
    delete headers["content-length"];
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    // The suite's Host is kept (the DNS-rebinding scenario sends a foreign one); only the port moves.
    if (headers.host?.startsWith("localhost:") || headers.host?.startsWith("127.0.0.1:")) {
      headers.host = upstream.host;
    }
    const forwarded = httpRequest(
      upstream,
      { method: request.method, headers: { ...headers, "content-length": Buffer.byteLength(body) } },
      async (reply) => {
        const streaming = request.method === "GET";
        const replyHeaders = { ...reply.headers };
        if (!streaming) delete replyHeaders["content-length"];
        response.writeHead(reply.statusCode ?? 502, replyHeaders);
        if (streaming) {
          reply.on("data", (chunk: Buffer) => response.write(toSuite(chunk.toString("utf8"))));
          reply.on("end", () => response.end());
          response.on("close", () => reply.destroy());
          return;
        }
        response.end(toSuite(await readAll(reply)));
      },
    );
    forwarded.on("error", () => {
      if (!response.headersSent) response.writeHead(502);
      response.end();
    });
    forwarded.end(body);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${upstream.pathname}`,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
}
