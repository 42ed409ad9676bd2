/** The mesh tool source: the catalogue and calls of every node on the NATS mesh, through `@tackle/mesh`'s client. */
import type { ToolCallResult } from "@tackle/core";
import type { ModuleInfo, SourceCallOptions, SourceError, ToolSource } from "./tool-source.ts";

/** The part of `@tackle/mesh`'s `MeshClient` this source needs. */
export interface MeshClientLike {
  catalogue(): Promise<readonly ModuleInfo[]>;
  call(qualifiedName: string, args: unknown, options?: SourceCallOptions): Promise<ToolCallResult>;
  /** The broker as the client sees it; its error names the broker. */
  broker?(): { readonly url: string; readonly connected: boolean; readonly error?: string };
  close(): Promise<void>;
}

export interface MeshSourceOptions {
  /**
   * This node's own modules, from its runtime's local state: listed even while the broker is
   * unreachable (`tackle serve` passes its runtime's).
   */
  readonly local?: () => readonly ModuleInfo[];
}

export function createMeshToolSource(
  client: MeshClientLike,
  description: string,
  options: MeshSourceOptions = {},
): ToolSource {
  const brokerErrors = (): SourceError[] => {
    const status = client.broker?.();
    return status === undefined || status.connected
      ? []
      : [
          {
            source: `broker ${status.url}`,
            message: status.error ?? `The broker ${status.url} is unreachable`,
          },
        ];
  };
  return {
    description: `mesh ${description}`,
    async catalogue() {
      const modules = [...(await client.catalogue())];
      const down = brokerErrors();
      if (down.length > 0 && options.local !== undefined) {
        // The mesh cannot be asked: this node's own modules are listed from what it loaded.
        for (const own of options.local()) {
          const note = {
            source: down[0]!.source,
            message: `${down[0]!.message}; listed from this node's own state (other nodes cannot reach it now)`,
          };
          const entry: ModuleInfo = { ...own, errors: [...own.errors, note] };
          const index = modules.findIndex((info) => info.module === own.module);
          if (index === -1) modules.push(entry);
          else modules[index] = entry;
        }
      }
      return modules.sort((left, right) => left.module.localeCompare(right.module));
    },
    errors: brokerErrors,
    call: (qualifiedName, args, options) => client.call(qualifiedName, args, options),
    close: () => client.close(),
  };
}
