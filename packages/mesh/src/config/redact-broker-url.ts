/** A broker URL fit for logs, error messages and MCP instructions: a NATS URL may carry a user and password, or a token. */
export function redactBrokerUrl(value: string): string {
  return value
    .split(",")
    .map((server) => server.replace(/^(\s*(?:[A-Za-z][A-Za-z0-9+.-]*:\/\/)?)[^/@\s]*@/, "$1***@"))
    .join(",");
}
