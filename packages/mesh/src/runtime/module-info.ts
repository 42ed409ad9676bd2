/** What a module answers to `tools`, and what the client reports for each module. */
import type { JsonSchema } from "@tackle/core";
import type { LoadError, LoadedModule } from "../bundles/load-modules.ts";

export interface ModuleToolInfo {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: JsonSchema;
  /** The JSON Schema of the tool's output, where it declares an object output (MCP's `outputSchema`). */
  readonly outputSchema?: JsonSchema;
}

export interface ModuleInfo {
  readonly module: string;
  /** `failed`: it loaded no tool and has load errors; `unreachable`: nothing answered for it. */
  readonly status: "ok" | "failed" | "unreachable";
  /** The node that answered. */
  readonly node?: string;
  /** The subject prefix its tools answer on. */
  readonly prefix?: string;
  /** Seats it holds on that node, to their subject prefixes. */
  readonly seats?: Readonly<Record<string, string>>;
  /** The bundle's identity (`sha256:…`), as the node that answered loaded it. */
  readonly digest?: string;
  readonly tools: readonly ModuleToolInfo[];
  readonly errors: readonly LoadError[];
}

export function describeModule(
  loaded: LoadedModule,
  where: {
    node: string;
    prefix?: string;
    seats?: Readonly<Record<string, string>>;
    /** Why this node does not serve the module (not issued to it, or refused): listed as failed. */
    notServed?: string;
  },
): ModuleInfo {
  const tools = loaded.toolset.tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputJsonSchema,
    // MCP output schemas describe objects; a tool with any other output shape advertises none.
    ...(tool.outputJsonSchema?.type === "object" ? { outputSchema: tool.outputJsonSchema } : {}),
  }));
  return {
    module: loaded.module,
    status:
      where.notServed !== undefined || (tools.length === 0 && loaded.errors.length > 0) ? "failed" : "ok",
    node: where.node,
    digest: loaded.digest,
    ...(where.prefix === undefined ? {} : { prefix: where.prefix }),
    ...(where.seats === undefined ? {} : { seats: where.seats }),
    tools,
    errors:
      where.notServed === undefined
        ? loaded.errors
        : [...loaded.errors, { source: `node ${where.node}`, message: where.notServed }],
  };
}
