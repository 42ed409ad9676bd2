/** The embedded tool source: modules loaded in this process, called directly, no broker needed. */
import { ToolError, type ToolSet, UnknownToolError } from "@tackle/core";
import { splitToolName } from "./split-tool-name.ts";
import type { ModuleInfo, SourceError, ToolSource } from "./tool-source.ts";

/** The part of `@tackle/mesh`'s `LoadedModule` this source needs. */
export interface EmbeddedModule {
  readonly module: string;
  readonly toolset: ToolSet;
  readonly errors: readonly SourceError[];
  close(): Promise<void> | void;
}

export function createEmbeddedToolSource(modules: readonly EmbeddedModule[]): ToolSource {
  const byName = new Map(modules.map((loaded) => [loaded.module, loaded]));
  const catalogue: ModuleInfo[] = [...byName.values()]
    .map((loaded) => ({
      module: loaded.module,
      status:
        loaded.errors.length > 0 && loaded.toolset.names.length === 0 ? ("failed" as const) : ("ok" as const),
      tools: loaded.toolset.tools.map((tool) => ({
        name: tool.name,
        description: tool.description,
        inputSchema: tool.inputJsonSchema,
        ...(tool.outputJsonSchema === undefined ? {} : { outputSchema: tool.outputJsonSchema }),
      })),
      errors: [...loaded.errors],
    }))
    .sort((left, right) => left.module.localeCompare(right.module));

  return {
    description: "embedded",
    catalogue: async () => catalogue,
    async call(qualifiedName, args, options = {}) {
      const parts = splitToolName(qualifiedName);
      const loaded = parts === undefined ? undefined : byName.get(parts.module);
      if (parts === undefined || loaded === undefined) {
        return {
          ok: false,
          error: unknownModule(
            qualifiedName,
            catalogue.map((info) => info.module),
          ),
        };
      }
      if (!loaded.toolset.has(parts.tool) && loaded.toolset.names.length === 0 && loaded.errors.length > 0) {
        // "Unknown tool, available: (none)" would hide why: the module is there, it failed to load.
        return { ok: false, error: moduleFailed(qualifiedName, loaded) };
      }
      if (!loaded.toolset.has(parts.tool)) {
        const available = loaded.toolset.names.map((name) => `${loaded.module}.${name}`);
        return { ok: false, error: new UnknownToolError(qualifiedName, available) };
      }
      return loaded.toolset.call(parts.tool, args, {
        calledAs: qualifiedName,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
        ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
        ...(options.logger === undefined ? {} : { logger: options.logger }),
        ...(options.client === undefined ? {} : { client: options.client }),
      });
    },
    async close() {
      const results = await Promise.allSettled(modules.map(async (loaded) => loaded.close()));
      const failed = results.find((result) => result.status === "rejected");
      if (failed !== undefined) throw failed.reason;
    },
  };
}

/** `unknown_tool` naming the modules that exist, for a name whose module is not served here. */
export function unknownModule(qualifiedName: string, modules: readonly string[]): ToolError {
  return new ToolError(
    "unknown_tool",
    `Unknown tool "${qualifiedName}": tools are named module.tool, and the modules here are ${modules.join(", ") || "(none)"}`,
    { data: { tool: qualifiedName, modules } },
  );
}

/** `unavailable` for a call into a module that loaded no tools, naming why it failed to load. */
function moduleFailed(qualifiedName: string, loaded: EmbeddedModule): ToolError {
  const reasons = loaded.errors.map((error) => `${error.source}: ${error.message}`).join("; ");
  return new ToolError(
    "unavailable",
    `Module "${loaded.module}" failed to load, so "${qualifiedName}" cannot be called: ${reasons}`,
    { data: { tool: qualifiedName, module: loaded.module, errors: [...loaded.errors] } },
  );
}
