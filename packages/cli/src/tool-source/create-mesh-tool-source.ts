/** The mesh tool source: the catalogue and calls of every node on the NATS mesh, through `@tackle/mesh`'s client. */
import type { ToolCallResult } from "@tackle/core";
import type { ModuleInfo, SourceCallOptions, ToolSource } from "./tool-source.ts";

/** The part of `@tackle/mesh`'s `MeshClient` this source needs. */
export interface MeshClientLike {
  catalogue(): Promise<readonly ModuleInfo[]>;
  call(qualifiedName: string, args: unknown, options?: SourceCallOptions): Promise<ToolCallResult>;
  close(): Promise<void>;
}

export function createMeshToolSource(client: MeshClientLike, description: string): ToolSource {
  return {
    description: `mesh ${description}`,
    async catalogue() {
      const modules = await client.catalogue();
      return [...modules].sort((left, right) => left.module.localeCompare(right.module));
    },
    call: (qualifiedName, args, options) => client.call(qualifiedName, args, options),
    close: () => client.close(),
  };
}
