/**
 * A `tools/call`'s arguments as the client sent them. The MCP SDK parses a request's arguments as a
 * record, assigning keys, so a top-level `__proto__` key is dropped (or made the record's prototype)
 * before a tool's own schema judges them: a strict schema that refuses the key accepted the call over
 * MCP alone, and a loose one lost it. Core's server and the CLI's console both read them here.
 */

/**
 * Wraps the `tools/call` request handler registered on `server` (an MCP SDK `Server`: the low-level
 * one, `McpServer.server` for the high-level) so that each call's arguments as sent are kept in `sent`
 * by the call's context, where the registered handler reads them. Call it after that handler is
 * registered; without one (or on an SDK that keeps its handlers elsewhere) it does nothing, and the
 * handler falls back to the parsed arguments.
 */
export function keepSentArguments(server: object, sent: WeakMap<object, unknown>): void {
  const protocol = server as {
    _requestHandlers?: Map<string, (request: unknown, context: unknown) => unknown>;
  };
  const handlers = protocol._requestHandlers;
  const handler = handlers?.get("tools/call");
  if (handlers === undefined || handler === undefined) return;
  handlers.set("tools/call", (request, context) => {
    const args = (request as { params?: { arguments?: unknown } } | undefined)?.params?.arguments;
    if (typeof context === "object" && context !== null && args !== undefined) sent.set(context, args);
    return handler(request, context);
  });
}
