/**
 * A scripted stand-in for the hosted OpenAI API on loopback: real HTTP, the real wire format
 * (JSON and server-sent events) for `/v1/chat/completions` and `/v1/responses`. It records every
 * request body so tests can assert what the middleware sent.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface WireRequest {
  readonly path: string;
  readonly body: Record<string, unknown>;
}

export interface OpenAIWireServer {
  readonly baseURL: string;
  readonly requests: WireRequest[];
  close(): Promise<void>;
}

/** `answer` scripts the model: the reply text for a request body. */
export async function startOpenAIWireServer(
  answer: (body: Record<string, unknown>) => string,
  options: { readonly jitterMs?: number; readonly record?: boolean } = {},
): Promise<OpenAIWireServer> {
  const jitterMs = options.jitterMs ?? 5;
  const requests: WireRequest[] = [];
  let sequence = 0;
  const server = createServer(async (request, response) => {
    const body = JSON.parse(await readBody(request)) as Record<string, unknown>;
    if (options.record !== false) requests.push({ path: request.url ?? "", body });
    const text = answer(body);
    const id = `id_${++sequence}`;
    // Let concurrent requests interleave, as a hosted model would.
    if (jitterMs > 0) await new Promise((resolve) => setTimeout(resolve, Math.random() * jitterMs));
    if (request.url === "/v1/chat/completions") return chat(response, id, text, body.stream === true);
    if (request.url === "/v1/responses") return responses(response, id, text, body.stream === true);
    response
      .writeHead(404, { "content-type": "application/json" })
      .end(JSON.stringify({ error: { message: "no such route" } }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

function chat(response: ServerResponse, id: string, text: string, stream: boolean) {
  const base = { id, created: 1_700_000_000, model: "scripted" };
  if (!stream) {
    return json(response, {
      ...base,
      object: "chat.completion",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: text, refusal: null },
          finish_reason: "stop",
          logprobs: null,
        },
      ],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    });
  }
  const words = text.split(/(?<= )/);
  const chunks = [
    { choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] },
    ...words.map((word) => ({ choices: [{ index: 0, delta: { content: word }, finish_reason: null }] })),
    { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
  ];
  sse(
    response,
    chunks.map((chunk) => ({ data: { ...base, object: "chat.completion.chunk", ...chunk } })),
  );
}

function responses(response: ServerResponse, id: string, text: string, stream: boolean) {
  const message = {
    id: `msg_${id}`,
    type: "message",
    role: "assistant",
    status: "completed",
    content: [{ type: "output_text", text, annotations: [] }],
  };
  const done = {
    id,
    object: "response",
    created_at: 1_700_000_000,
    model: "scripted",
    status: "completed",
    output: [message],
    usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
  };
  if (!stream) return json(response, done);
  const events = [
    { type: "response.created", response: { ...done, status: "in_progress", output: [] } },
    ...text.split(/(?<= )/).map((delta) => ({
      type: "response.output_text.delta",
      item_id: message.id,
      output_index: 0,
      content_index: 0,
      delta,
    })),
    { type: "response.completed", response: done },
  ];
  sse(
    response,
    events.map((event, index) => ({ event: event.type, data: { ...event, sequence_number: index } })),
  );
}

function json(response: ServerResponse, body: unknown) {
  response
    .writeHead(200, { "content-type": "application/json", "x-request-id": "req_scripted" })
    .end(JSON.stringify(body));
}

function sse(response: ServerResponse, events: { event?: string; data: unknown }[]) {
  response.writeHead(200, { "content-type": "text/event-stream", "x-request-id": "req_scripted" });
  for (const event of events) {
    response.write(
      `${event.event === undefined ? "" : `event: ${event.event}\n`}data: ${JSON.stringify(event.data)}\n\n`,
    );
  }
  response.end("data: [DONE]\n\n");
}

async function readBody(request: IncomingMessage): Promise<string> {
  let body = "";
  for await (const chunk of request) body += chunk;
  return body;
}
