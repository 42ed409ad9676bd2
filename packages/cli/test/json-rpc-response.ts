/** The JSON-RPC message of an MCP HTTP response, whether it came as JSON or as the last SSE event. */
export async function readJsonRpc(
  response: Response,
): Promise<{ result?: Record<string, unknown>; error?: unknown }> {
  const text = await response.text();
  if (response.headers.get("content-type")?.includes("text/event-stream")) {
    const events = text
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)));
    return events.at(-1);
  }
  return JSON.parse(text);
}
