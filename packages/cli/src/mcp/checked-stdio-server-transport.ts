/**
 * The SDK's stdio server transport, answering the lines it would drop without a word: one that is
 * not JSON gets JSON-RPC's parse error, one that is JSON but no JSON-RPC message (or a batch) gets
 * invalid request, and one longer than the line limit gets invalid request at once and is skipped
 * to its end, so the session goes on. The requests it hands on are bounded (ADR 0270): at most
 * `maxInFlight` at once, the rest waiting in line, refused `overloaded` past `maxWaiting`.
 */
import type { Readable, Writable } from "node:stream";
import {
  INVALID_REQUEST,
  type JSONRPCMessage,
  PARSE_ERROR,
  parseJSONRPCMessage,
} from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { createStdioAdmission, type StdioAdmission, type StdioAdmissionOptions } from "./stdio-admission.ts";

/** The longest line read as one message: 4 MiB, the same bound the SDK's HTTP transport puts on a body. */
export const defaultMaxLineBytes = 4 * 1024 * 1024;

export interface CheckedStdioOptions extends StdioAdmissionOptions {
  /** Bytes a line may hold (its newline not counted); default {@link defaultMaxLineBytes}. */
  readonly maxLineBytes?: number;
}

const newline = 0x0a;

export class CheckedStdioServerTransport extends StdioServerTransport {
  readonly #maxLineBytes: number;
  readonly #admission: StdioAdmission;
  #line: Buffer[] = [];
  #lineBytes = 0;
  /** Inside a line already refused for its length: the rest of it up to its newline is dropped. */
  #skipping = false;

  constructor(stdin: Readable, stdout: Writable, options: CheckedStdioOptions = {}) {
    super(stdin, stdout);
    this.#maxLineBytes = options.maxLineBytes ?? defaultMaxLineBytes;
    this.#admission = createStdioAdmission(options, this.#maxLineBytes, {
      deliver: (message) => {
        try {
          this.onmessage?.(message);
        } catch (error) {
          this.onerror?.(error as Error);
        }
      },
      // A refusal for load is the client's to read, not this process's to log once per request.
      refuse: (id, code, message, data) => this.#answer(id, code, message, data),
    });
  }

  /** Requests read and waiting for a place (none once every request read has been handed on). */
  get waiting(): number {
    return this.#admission.waiting;
  }

  // Every answer the server sends gives its request's place back; the refusals below, sent past this,
  // answer requests that never had one.
  override send(...args: Parameters<StdioServerTransport["send"]>): Promise<void> {
    this.#admission.sent(args[0]);
    return super.send(...args);
  }

  override async close(): Promise<void> {
    this.#admission.clear();
    await super.close();
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
    this.#admission.receive(message, bytes.length);
  }

  #refuse(id: string | number | null, code: number, message: string, data?: unknown): void {
    this.onerror?.(new Error(message));
    this.#answer(id, code, message, data);
  }

  #answer(id: string | number | null, code: number, message: string, data?: unknown): void {
    const reply = { jsonrpc: "2.0", id, error: { code, message, ...(data === undefined ? {} : { data }) } };
    // JSON-RPC 2.0 answers an error whose id cannot be read with `id: null`, which the SDK's types omit.
    super.send(reply as unknown as JSONRPCMessage).catch((error: Error) => this.onerror?.(error));
  }
}

/** The id of a message that is not a valid one, when it has a usable id; otherwise null. */
function knownId(value: unknown): string | number | null {
  if (typeof value !== "object" || value === null) return null;
  const id = (value as { id?: unknown }).id;
  return typeof id === "string" || (typeof id === "number" && Number.isInteger(id)) ? id : null;
}
