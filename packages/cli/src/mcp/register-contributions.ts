/**
 * The MCP server's resources, prompts and completion handlers over what modules contribute through
 * the `mcp` seat (module-contributions.ts), and its resource subscriptions.
 */
import {
  ProtocolError,
  ProtocolErrorCode,
  ResourceNotFoundError,
  type Server,
} from "@modelcontextprotocol/server";
import type { ToolSource } from "../tool-source/tool-source.ts";
import { type ModuleContributions, moduleContributions } from "./module-contributions.ts";

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

/**
 * Resources one connection may be subscribed to at once: each is looked at every `subscriptionPollMs`,
 * so past it a subscription is refused until one ends (ADR 0274).
 */
export const maxSubscriptions = 1_000;

/** How often subscribed resources' versions are read (one look for all of a server's URIs). */
export const subscriptionPollMs = 1_000;

export function registerContributions(server: Server, source: ToolSource): Subscriptions {
  const contributions = moduleContributions(source);
  const uris = new Set<string>();
  const watch = watchSubscriptions(server, contributions, uris);
  server.setRequestHandler("resources/list", (request) =>
    contributions.listResources(request.params?.cursor),
  );
  server.setRequestHandler("resources/templates/list", (request) =>
    contributions.listTemplates(request.params?.cursor),
  );
  server.setRequestHandler("resources/read", (request, context) =>
    contributions.read(request.params.uri, { signal: context.mcpReq.signal }),
  );
  server.setRequestHandler("resources/subscribe", async (request) => {
    const { uri } = request.params;
    // A URI no module holds would be watched for ever and never change: refused as `resources/read` does.
    if ((await contributions.ownerOf(uri)) === undefined) throw new ResourceNotFoundError(uri);
    if (!uris.has(uri) && uris.size >= maxSubscriptions) {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `At most ${maxSubscriptions} resource subscriptions per connection: unsubscribe from one first`,
        { maxSubscriptions },
      );
    }
    uris.add(uri);
    await watch.subscribed(uri);
    return {};
  });
  server.setRequestHandler("resources/unsubscribe", (request) => {
    uris.delete(request.params.uri);
    watch.unsubscribed(request.params.uri);
    return {};
  });
  server.setRequestHandler("prompts/list", (request) => contributions.listPrompts(request.params?.cursor));
  server.setRequestHandler("prompts/get", (request, context) =>
    contributions.getPrompt(request.params.name, request.params.arguments, { signal: context.mcpReq.signal }),
  );
  server.setRequestHandler("completion/complete", (request, context) =>
    contributions.complete(
      request.params.ref,
      request.params.argument,
      request.params.context,
      context.mcpReq.signal,
    ),
  );
  return { uris };
}

/**
 * Sends `notifications/resources/updated` for a subscribed URI whose version changed, whoever changed
 * it (another client, the web page, another server on the same store): the versions are read from the
 * modules every `subscriptionPollMs` while this server has subscriptions, and not at all otherwise.
 */
function watchSubscriptions(server: Server, contributions: ModuleContributions, uris: Set<string>) {
  const seen = new Map<string, string>();
  let timer: NodeJS.Timeout | undefined;
  let looking = false;
  const look = async () => {
    // A closed connection (its session ended) is watched no more.
    if (server.transport === undefined) return stop();
    if (looking) return;
    looking = true;
    try {
      const versions = await contributions.versions([...uris]);
      for (const [uri, version] of versions) {
        const before = seen.get(uri);
        if (!uris.has(uri)) continue;
        seen.set(uri, version);
        if (before !== undefined && before !== version) await server.sendResourceUpdated({ uri });
      }
    } catch {
      // The connection went away, or no module answered: the next look tries again.
    } finally {
      looking = false;
    }
  };
  const stop = () => {
    if (timer !== undefined) clearInterval(timer);
    timer = undefined;
  };
  return {
    async subscribed(uri: string) {
      // The version as of the subscription: a change after it is what the client hears of.
      const now = await contributions.versions([uri]);
      const version = now.get(uri);
      if (version !== undefined) seen.set(uri, version);
      if (timer === undefined) {
        timer = setInterval(() => void look(), subscriptionPollMs);
        timer.unref();
      }
    },
    unsubscribed(uri: string) {
      seen.delete(uri);
      if (uris.size === 0) stop();
    },
  };
}
