/**
 * A local HTTP server speaking the OpenAI wire format (chat completions and responses) with a scripted
 * model: it stands in for the hosted API, the one thing that cannot run here. The first turn asks for
 * the scripted tool calls; once tool results come back it answers with text quoting them.
 */
import { once } from "node:events";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

export interface ScriptedCall {
  /** The model-safe tool name the scripted model calls. */
  readonly name: string;
  /** The argument text it sends (JSON, or deliberately not). */
  readonly arguments: string;
}

export interface ScriptedOpenAIServer {
  /** The `baseURL` to give the `openai` client (ends in `/v1`). */
  readonly baseURL: string;
  /** Every request body received, with its path, in order. */
  readonly requests: { readonly path: string; readonly body: Record<string, unknown> }[];
  close(): Promise<void>;
}

export async function startScriptedOpenAIServer(
  calls: readonly ScriptedCall[],
): Promise<ScriptedOpenAIServer> {
  const requests: { path: string; body: Record<string, unknown> }[] = [];
  let sequence = 0;
  const server = createServer(async (request, response) => {
    const body = JSON.parse(await readBody(request)) as Record<string, unknown>;
    const path = new URL(request.url ?? "/", "http://localhost").pathname;
    requests.push({ path, body });
    sequence += 1;
    let answer: unknown;
    if (request.method === "POST" && path === "/v1/chat/completions")
      answer = chatAnswer(body, calls, sequence);
    else if (request.method === "POST" && path === "/v1/responses")
      answer = responsesAnswer(body, calls, sequence);
    if (answer === undefined) {
      response.writeHead(404, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          error: { message: `No route ${request.method} ${path}`, type: "invalid_request_error" },
        }),
      );
      return;
    }
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify(answer));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };

function chatAnswer(body: Record<string, unknown>, calls: readonly ScriptedCall[], sequence: number) {
  const messages = (body.messages ?? []) as { role: string; content?: unknown }[];
  const toolResults = messages
    .filter((message) => message.role === "tool")
    .map((message) => String(message.content));
  const message =
    toolResults.length > 0
      ? { role: "assistant", content: `Tool results: ${toolResults.join(" | ")}`, refusal: null }
      : {
          role: "assistant",
          content: null,
          refusal: null,
          tool_calls: calls.map((call, index) => ({
            id: `call_${sequence}_${index}`,
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          })),
        };
  return {
    id: `chatcmpl-${sequence}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: String(body.model),
    choices: [
      { index: 0, message, logprobs: null, finish_reason: toolResults.length > 0 ? "stop" : "tool_calls" },
    ],
    usage,
  };
}

function responsesAnswer(body: Record<string, unknown>, calls: readonly ScriptedCall[], sequence: number) {
  const input = Array.isArray(body.input) ? (body.input as { type?: string; output?: unknown }[]) : [];
  const outputs = input
    .filter((item) => item.type === "function_call_output")
    .map((item) => String(item.output));
  const output =
    outputs.length > 0
      ? [
          {
            type: "message",
            id: `msg_${sequence}`,
            role: "assistant",
            status: "completed",
            content: [{ type: "output_text", text: `Tool results: ${outputs.join(" | ")}`, annotations: [] }],
          },
        ]
      : calls.map((call, index) => ({
          type: "function_call",
          id: `fc_${sequence}_${index}`,
          call_id: `call_${sequence}_${index}`,
          name: call.name,
          arguments: call.arguments,
          status: "completed",
        }));
  return {
    id: `resp_${sequence}`,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status: "completed",
    model: String(body.model),
    output,
    parallel_tool_calls: true,
    tool_choice: "auto",
    tools: body.tools ?? [],
    usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
  };
}
