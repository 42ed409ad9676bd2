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
   * This node's own modules, from its runtime's local state: listed (`unreachable`, with their tools)
   * even while the broker is unreachable (`tackle serve` passes its runtime's).
   */
  readonly local?: () => readonly ModuleInfo[];
}

const byModule = (left: ModuleInfo, right: ModuleInfo) => left.module.localeCompare(right.module);

/**
 * The listing while the broker is down: every call goes through the broker, this node's own modules'
 * included, so none is `ok`. Each module the mesh or this node knows is `unreachable` (a `failed` one
 * stays `failed`), with its own errors but not the broker's: the source's `errors()` says that once.
 */
function brokerDown(known: readonly ModuleInfo[], local: readonly ModuleInfo[]): ModuleInfo[] {
  const modules = new Map(known.map((info) => [info.module, info]));
  for (const own of local) modules.set(own.module, own);
  return [...modules.values()]
    .map((info) => ({
      ...info,
      status: info.status === "failed" ? ("failed" as const) : ("unreachable" as const),
      errors: info.errors.filter((error) => !error.source.startsWith("broker ")),
    }))
    .sort(byModule);
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
      if (down.length > 0) return brokerDown(modules, options.local?.() ?? []);
      return modules.sort(byModule);
    },
    errors: brokerErrors,
    call: (qualifiedName, args, options) => client.call(qualifiedName, args, options),
    close: () => client.close(),
  };
}
