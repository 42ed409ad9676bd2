/**
 * `createMeshClient`: the mesh from the caller's side: the catalogue with each module's status, one
 * module's tools, and `module.tool` calls over NATS with errors as data.
 *
 * Its parts: the link to the broker (`client-link.ts`), where modules answer (`module-directory.ts`),
 * one call on the bus (`send-call.ts`, sent again on a node's `overloaded` refusal by
 * `retry-overloaded.ts`, out of the module's `retry-budget.ts`, kept by `module-budgets.ts`) and where a call goes (`route-call.ts`).
 */
import { DEFAULT_TIMEOUT_MS } from "@tackle/core";
import { connectMesh } from "../nats/connect-mesh.ts";
import { openClientLink } from "./client-link.ts";
import type { CreateMeshClientOptions, MeshClient } from "./mesh-client-api.ts";
import { createModuleDirectory } from "./module-directory.ts";
import { retryPolicy } from "./retry-overloaded.ts";
import { callSeat, callTool } from "./route-call.ts";
import { createCallSender } from "./send-call.ts";

export type {
  BrokerStatus,
  CreateMeshClientOptions,
  MeshCallOptions,
  MeshClient,
  MeshListOptions,
} from "./mesh-client-api.ts";
export type { RetryBudgetOptions } from "./retry-budget.ts";
export type { RetryOverloadedOptions } from "./retry-overloaded.ts";

export async function createMeshClient(options: CreateMeshClientOptions = {}): Promise<MeshClient> {
  // Checked before anything is dialled: a bad option throws a RangeError.
  const retry = retryPolicy(options.retryOverloaded);
  const connection =
    options.connection ??
    (await connectMesh({
      ...(options.servers === undefined ? {} : { servers: options.servers }),
      ...(options.credsFile === undefined ? {} : { credsFile: options.credsFile }),
      ...(options.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: options.connectTimeoutMs }),
      signal: options.signal,
      name: "tackle-mesh client",
    }));
  const ownsConnection = options.connection === undefined;
  const defaultTimeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const link = openClientLink(connection, { servers: options.servers, nodeWatch: options.nodeWatch });
  const directory = createModuleDirectory(link, { defaultTimeoutMs, discoveryMs: options.discoveryMs });
  const send = createCallSender(link, defaultTimeoutMs, retry);
  return {
    connection,
    broker: () => link.broker(),
    catalogue: (listOptions) => directory.catalogue(listOptions),
    tools: (module, listOptions = {}) => directory.tools(module, listOptions.signal),
    call: (name, args, callOptions = {}) => callTool(directory, send, name, args, callOptions),
    callSeat: (seat, verb, args, callOptions = {}) => callSeat(link, send, seat, verb, args, callOptions),
    close: () => link.close(ownsConnection),
  };
}
