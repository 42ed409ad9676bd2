/** Reads `--console <url>`, refusing any URL off loopback: the console token must never leave this machine. */
import { isLoopbackHost } from "@tackle/core/internal";
import { CliError } from "../program/cli-error.ts";

/** The console's MCP endpoint as a URL (a bare origin gets `/mcp`). */
export function parseConsoleUrl(value: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch (error) {
    throw new CliError(
      "invalid_arguments",
      `--console ${value} is not a URL (for example http://127.0.0.1:4270/mcp)`,
      { cause: error, exitCode: 2 },
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new CliError("invalid_arguments", `--console ${value} is not an http:// URL`, { exitCode: 2 });
  }
  // The console binds loopback only, so any other host is a mistake or a trap: it would receive the token.
  if (!isLoopbackHost(url.hostname)) {
    throw new CliError(
      "not_loopback",
      `--console ${url.origin} refused: a console answers on loopback only (127.0.0.1, ::1 or localhost), and the console token is sent to whatever this names`,
      { exitCode: 2 },
    );
  }
  if (url.pathname === "/" || url.pathname === "") url.pathname = "/mcp";
  return url;
}
