/** `ToolSource`: what the console, `tackle mcp`, `tools` and `call` read from — a catalogue and a call. */
import type { Logger, ToolCallResult, ToolClient, ToolProgress } from "@tackle/core";

/** One tool as a module describes it (bare name; the source qualifies it as `module.tool`). */
export interface ToolInfo {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Record<string, unknown>;
  /** The JSON Schema of the tool's output, where the tool declares one and the source carries it. */
  readonly outputSchema?: Record<string, unknown>;
}

/** A load or reach failure, named so a person can find it. */
export interface SourceError {
  readonly source: string;
  readonly message: string;
}

/** A module as the catalogue reports it; `unreachable` and `failed` modules stay in the list. */
export interface ModuleInfo {
  readonly module: string;
  readonly status: "ok" | "failed" | "unreachable";
  readonly node?: string;
  readonly tools: readonly ToolInfo[];
  readonly errors: readonly SourceError[];
}

export interface SourceCallOptions {
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  /** The tool's progress reports, where the source can carry them. */
  readonly onProgress?: (update: ToolProgress) => void;
  /** Receives the tool's log lines, where the source can carry them. */
  readonly logger?: Logger;
  /**
   * The least severe log line the caller wants in `logger`; absent when its client asked for none. A
   * source that pays to carry log lines (the mesh) carries them only when this is set.
   */
  readonly logLevel?: "debug" | "info" | "warn" | "error";
  /**
   * What the calling MCP client can be asked (elicitation, sampling), where the source can carry it
   * (tools in this process).
   */
  readonly client?: ToolClient;
}

export interface ToolSource {
  /** Where the tools come from, for people: `embedded`, `mesh nats://…`, `console http://…`. */
  readonly description: string;
  /** Every module, in a stable order, including the ones that failed or did not answer. */
  catalogue(): Promise<readonly ModuleInfo[]>;
  /**
   * What is wrong with the source itself as of now (the broker unreachable, the console's own
   * report of that): empty when all is well. Absent on sources that cannot fail so.
   */
  errors?(): readonly SourceError[];
  /** Calls `module.tool`; every failure (unknown module, unreachable, tool error) comes back as data. */
  call(qualifiedName: string, args: unknown, options?: SourceCallOptions): Promise<ToolCallResult>;
  close(): Promise<void>;
}
