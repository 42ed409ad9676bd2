/**
 * The MCP SDK's stdio transport, plus what the runtime needs and the SDK keeps private: the child's
 * exit code or signal, so calls in flight can fail naming it (ADR 0203).
 */
import type { ChildProcess } from "node:child_process";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export class StdioChildTransport extends StdioClientTransport {
  /** Why the child never ran (its command is missing or not executable), when it did not. */
  spawnError: Error | undefined;
  /** Settles once when the child process exits. */
  readonly exited: Promise<ChildExit>;
  #settleExit: (exit: ChildExit) => void = () => {};
  #process: ChildProcess | undefined;

  constructor(...parameters: ConstructorParameters<typeof StdioClientTransport>) {
    super(...parameters);
    this.exited = new Promise((resolve) => {
      this.#settleExit = resolve;
    });
    // The SDK's read buffer is handed whole lines only (`WholeLines` says why), within its own limit.
    const sdk = this as unknown as { _readBuffer?: SdkReadBuffer & { _maxBufferSize?: number } };
    if (sdk._readBuffer !== undefined)
      sdk._readBuffer = new WholeLines(sdk._readBuffer, sdk._readBuffer._maxBufferSize ?? maxLineBytes);
    // The SDK client hands a notification to its handler a microtask later, but settles a call the
    // moment its result is read: a progress notification read in the same chunk as its call's result
    // would find the call gone and be dropped. A result waits one microtask, behind what came before.
    let handler: StdioClientTransport["onmessage"];
    const dispatch: NonNullable<StdioClientTransport["onmessage"]> = (message) => {
      if ("id" in message && !("method" in message)) queueMicrotask(() => handler?.(message));
      else handler?.(message);
    };
    Object.defineProperty(this, "onmessage", {
      configurable: true,
      enumerable: true,
      get: () => (handler === undefined ? undefined : dispatch),
      set: (value: StdioClientTransport["onmessage"]) => {
        handler = value;
      },
    });
  }

  override async start(): Promise<void> {
    try {
      await super.start();
    } catch (error) {
      this.spawnError = error instanceof Error ? error : new Error(String(error));
      this.#settleExit({ code: null, signal: null });
      throw error;
    }
    const child = (this as unknown as { _process?: ChildProcess })._process;
    if (child === undefined) {
      // The SDK changed its internals: the exit is still seen through the client's close, without its status.
      return;
    }
    this.#process = child;
    child.once("exit", (code, signal) => this.#settleExit({ code, signal }));
  }

  /**
   * The SDK gave the connection up on its own: the child wrote a line past its 10 MiB read buffer, so
   * nothing it says can be read any more. The child was killed (see `close`).
   */
  lost = false;
  #closeExpected = false;

  /** The owner is about to close: the SDK's close (stdin ended, time to exit) is the graceful one asked for. */
  expectClose(): void {
    this.#closeExpected = true;
  }

  /**
   * Called by the owner after `expectClose`, or by the SDK itself when the child's output overflows its
   * read buffer. Then the child is killed: left running until the SDK's own close gave up on it (up to
   * 4 s), it held the session, and every call sent to it failed "Not connected" as `tool_failed`; killed,
   * its calls fail with its exit (`child_exited`, retryable) and the next call starts a new child.
   */
  override async close(): Promise<void> {
    if (!this.#closeExpected) {
      this.lost = true;
      this.kill("SIGKILL");
    }
    await super.close();
  }

  /** Whether `exited` settles when the child exits (it does unless the SDK's internals moved). */
  get watchesExit(): boolean {
    return this.#process !== undefined;
  }

  /**
   * This side signalled the child while it ran (`kill`): a signal in its exit status may be this
   * side's own, not an outside kill (an OOM kill, an operator's) that ADR 0227 restarts after.
   */
  killedByHost = false;

  /** Kills the child at once (the SDK's close waits for a graceful exit first). */
  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    const child = this.#process;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      this.killedByHost = true;
      child.kill(signal);
    }
  }
}

/** The SDK's default read buffer limit (10 MiB): a line longer closes the transport. */
const maxLineBytes = 10 * 1024 * 1024;

/** What the SDK's stdio transport asks of its read buffer. */
interface SdkReadBuffer {
  append(chunk: Buffer): void;
  readMessage(): unknown;
  clear(): void;
}

/**
 * Hands the SDK's read buffer whole lines only. Given every chunk, it joined the buffer and looked for
 * a line break from its start again on each one: a 10 MiB line, read in pipe-sized chunks, cost the
 * node seconds of CPU (11 s on a quiet machine), and every later answer of the child waited behind it.
 * The part of a line not yet ended is kept as chunks, joined once its break comes; past the limit it
 * is dropped and the SDK told, as its own buffer does.
 */
class WholeLines implements SdkReadBuffer {
  readonly #lines: SdkReadBuffer;
  readonly #limit: number;
  #partial: Buffer[] = [];
  #partialBytes = 0;

  constructor(lines: SdkReadBuffer, limit: number) {
    this.#lines = lines;
    this.#limit = limit;
  }

  append(chunk: Buffer): void {
    if (this.#partialBytes + chunk.length > this.#limit) {
      this.clear();
      throw new Error(`ReadBuffer exceeded maximum size of ${this.#limit} bytes`);
    }
    const lastBreak = chunk.lastIndexOf(0x0a);
    if (lastBreak === -1) {
      this.#partial.push(chunk);
      this.#partialBytes += chunk.length;
      return;
    }
    const ended = Buffer.concat([...this.#partial, chunk.subarray(0, lastBreak + 1)]);
    const rest = chunk.subarray(lastBreak + 1);
    this.#partial = rest.length === 0 ? [] : [rest];
    this.#partialBytes = rest.length;
    this.#lines.append(ended);
  }

  readMessage(): unknown {
    return this.#lines.readMessage();
  }

  clear(): void {
    this.#partial = [];
    this.#partialBytes = 0;
    this.#lines.clear();
  }
}
