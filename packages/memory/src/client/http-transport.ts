/** One HTTP exchange over `node:http`/`node:https`, with the SSRF guard at connect time and a timeout. */
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { MemoryNetworkError } from "../errors/memory-network-error.ts";
import { MemoryTimeoutError } from "../errors/memory-timeout-error.ts";
import { SsrfRefusedError } from "../errors/ssrf-refused-error.ts";
import { guardedLookup } from "./ssrf-guard.ts";

export interface TransportRequest {
  readonly url: URL;
  readonly method: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
  readonly timeoutMs: number;
  readonly allowPrivateNetwork: boolean;
  readonly signal?: AbortSignal;
}

export interface TransportResponse {
  readonly status: number;
  readonly headers: IncomingMessage["headers"];
  readonly text: string;
}

const maximumResponseBytes = 32 * 1024 * 1024;

export function sendRequest(request: TransportRequest): Promise<TransportResponse> {
  return new Promise((resolve, reject) => {
    // Aborted before the request: nothing is sent (the caller names the error).
    if (request.signal?.aborted) {
      reject(request.signal.reason);
      return;
    }
    const send = request.url.protocol === "https:" ? httpsRequest : httpRequest;
    const outgoing = send(
      request.url,
      {
        method: request.method,
        headers: request.headers,
        ...(request.allowPrivateNetwork ? {} : { lookup: guardedLookup(request.url.origin) as never }),
      },
      (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > maximumResponseBytes) {
            outgoing.destroy(
              new MemoryNetworkError(request.url.origin, new Error("response larger than 32 MiB")),
            );
            return;
          }
          chunks.push(chunk);
        });
        response.on("end", () => {
          clearTimeout(timer);
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            text: Buffer.concat(chunks).toString("utf8"),
          });
        });
        response.on("error", (error) => outgoing.destroy(error));
      },
    );
    const timer = setTimeout(
      () => outgoing.destroy(new MemoryTimeoutError(request.url.origin, request.timeoutMs)),
      request.timeoutMs,
    );
    const abort = () => outgoing.destroy(request.signal?.reason ?? new Error("aborted"));
    request.signal?.addEventListener("abort", abort, { once: true });
    outgoing.on("error", (error) => {
      clearTimeout(timer);
      request.signal?.removeEventListener("abort", abort);
      if (
        MemoryTimeoutError.isInstance(error) ||
        SsrfRefusedError.isInstance(error) ||
        MemoryNetworkError.isInstance(error) ||
        request.signal?.aborted
      ) {
        reject(error);
      } else {
        reject(new MemoryNetworkError(request.url.origin, error));
      }
    });
    outgoing.on("close", () => request.signal?.removeEventListener("abort", abort));
    if (request.body !== undefined) outgoing.end(request.body);
    else outgoing.end();
  });
}
