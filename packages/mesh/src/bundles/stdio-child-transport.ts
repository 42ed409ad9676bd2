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

  /** Kills the child at once (the SDK's close waits for a graceful exit first). */
  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    const child = this.#process;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) child.kill(signal);
  }
}
