/** The only variables a bundle sees from the runtime: who owns the machine, and nothing secret (ADR 0204). */
import type { MeshConfig } from "../config/load-mesh-config.ts";

export function childEnvironment(config: MeshConfig): Record<string, string> {
  return {
    MESH_NODE: config.node,
    ...(config.operatorAccount === undefined ? {} : { MESH_OPERATOR_ACCOUNT: config.operatorAccount }),
    ...(config.operatorHome === undefined ? {} : { MESH_OPERATOR_HOME: config.operatorHome }),
  };
}
