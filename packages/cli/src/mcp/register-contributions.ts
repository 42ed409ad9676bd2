/**
 * The MCP server's resources, prompts and completion handlers over what modules contribute through
 * the `mcp` seat (module-contributions.ts), and its resource subscriptions.
 */
import type { Server } from "@modelcontextprotocol/server";
import type { ToolSource } from "../tool-source/tool-source.ts";
import { moduleContributions } from "./module-contributions.ts";

/** The capabilities these handlers answer for. */
export const contributionCapabilities = {
  resources: { subscribe: true },
  prompts: {},
  completions: {},
} as const;

export interface Subscriptions {
  /** The URIs this server's client is subscribed to. */
  readonly uris: ReadonlySet<string>;
}

export function registerContributions(server: Server, source: ToolSource): Subscriptions {
  const contributions = moduleContributions(source);
  const uris = new Set<string>();
  server.setRequestHandler("resources/list", (request) =>
    contributions.listResources(request.params?.cursor),
  );
  server.setRequestHandler("resources/templates/list", (request) =>
    contributions.listTemplates(request.params?.cursor),
  );
  server.setRequestHandler("resources/read", (request, context) =>
    contributions.read(request.params.uri, { signal: context.mcpReq.signal }),
  );
  server.setRequestHandler("resources/subscribe", (request) => {
    uris.add(request.params.uri);
    return {};
  });
  server.setRequestHandler("resources/unsubscribe", (request) => {
    uris.delete(request.params.uri);
    return {};
  });
  server.setRequestHandler("prompts/list", (request) => contributions.listPrompts(request.params?.cursor));
  server.setRequestHandler("prompts/get", (request, context) =>
    contributions.getPrompt(request.params.name, request.params.arguments, { signal: context.mcpReq.signal }),
  );
  server.setRequestHandler("completion/complete", (request) =>
    contributions.complete(request.params.ref, request.params.argument, request.params.context),
  );
  return { uris };
}
