/**
 * The SDK's stdio server transport, answering the lines it would drop without a word: one that is
 * not JSON gets JSON-RPC's parse error, one that is JSON but no JSON-RPC message (or a batch) gets
 * invalid request, and one longer than the line limit gets invalid request at once and is skipped
 * to its end, so the session goes on.
 */
import type { Readable, Writable } from "node:stream";
import {
  INVALID_REQUEST,
  type JSONRPCMessage,
  PARSE_ERROR,
  parseJSONRPCMessage,
} from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";

/** The longest line read as one message: 4 MiB, the same bound the SDK's HTTP transport puts on a body. */
export const defaultMaxLineBytes = 4 * 1024 * 1024;

export interface CheckedStdioOptions {
  /** Bytes a line may hold (its newline not counted); default {@link defaultMaxLineBytes}. */
  readonly maxLineBytes?: number;
}

const newline = 0x0a;

export class CheckedStdioServerTransport extends StdioServerTransport {
  readonly #maxLineBytes: number;
  #line: Buffer[] = [];
  #lineBytes = 0;
  /** Inside a line already refused for its length: the rest of it up to its newline is dropped. */
  #skipping = false;

  constructor(stdin: Readable, stdout: Writable, options: CheckedStdioOptions = {}) {
    super(stdin, stdout);
    this.#maxLineBytes = options.maxLineBytes ?? defaultMaxLineBytes;
  }

  // The SDK reads stdin through this listener (it attaches and detaches `this._ondata`); its own
  // read buffer skips a line that is not JSON in silence and closes the session on a long one.
  // `override` turns a rename of it in a later SDK into a compile error, not a silent bypass.
  override _ondata = (chunk: Buffer): void => {
    let start = 0;
    while (start <= chunk.length) {
      const end = chunk.indexOf(newline, start);
      const piece = chunk.subarray(start, end === -1 ? chunk.length : end);
      if (!this.#skipping) this.#collect(piece);
      if (end === -1) return;
      if (this.#skipping) this.#skipping = false;
      else this.#receive(this.#takeLine());
      start = end + 1;
    }
  };

  #collect(piece: Buffer): void {
    if (this.#lineBytes + piece.length > this.#maxLineBytes) {
      this.#takeLine();
      this.#skipping = true;
      this.#refuse(
        null,
        INVALID_REQUEST,
        `Invalid Request: the line is longer than ${this.#maxLineBytes} bytes, the most this server reads as one message; it was skipped`,
        { maxLineBytes: this.#maxLineBytes },
      );
      return;
    }
    if (piece.length === 0) return;
    this.#line.push(piece);
    this.#lineBytes += piece.length;
  }

  #takeLine(): Buffer {
    const line = Buffer.concat(this.#line, this.#lineBytes);
    this.#line = [];
    this.#lineBytes = 0;
    return line;
  }

  #receive(bytes: Buffer): void {
    const text = bytes.toString("utf8");
    // A blank line carries no message (a client's extra "\r\n"): nothing to answer.
    if (text.trim() === "") return;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      this.#refuse(null, PARSE_ERROR, `Parse error: ${(error as Error).message}`);
      return;
    }
    if (Array.isArray(value)) {
      // JSON-RPC batches left MCP in revision 2025-06-18; the SDK's stdio server never read them.
      this.#refuse(
        null,
        INVALID_REQUEST,
        "Invalid Request: JSON-RPC batches are not accepted; send each message on its own line",
      );
      return;
    }
    let message: JSONRPCMessage;
    try {
      message = parseJSONRPCMessage(value);
    } catch {
      this.#refuse(
        knownId(value),
        INVALID_REQUEST,
        "Invalid Request: not a JSON-RPC 2.0 request, notification or response",
      );
      return;
    }
    try {
      this.onmessage?.(message);
    } catch (error) {
      this.onerror?.(error as Error);
    }
  }

  #refuse(id: string | number | null, code: number, message: string, data?: unknown): void {
    this.onerror?.(new Error(message));
    const reply = { jsonrpc: "2.0", id, error: { code, message, ...(data === undefined ? {} : { data }) } };
    // JSON-RPC 2.0 answers an error whose id cannot be read with `id: null`, which the SDK's types omit.
    this.send(reply as unknown as JSONRPCMessage).catch((error: Error) => this.onerror?.(error));
  }
}

/** The id of a message that is not a valid one, when it has a usable id; otherwise null. */
function knownId(value: unknown): string | number | null {
  if (typeof value !== "object" || value === null) return null;
  const id = (value as { id?: unknown }).id;
  return typeof id === "string" || (typeof id === "number" && Number.isInteger(id)) ? id : null;
}
