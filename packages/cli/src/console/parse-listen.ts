/** Reads `MESH_CONSOLE_LISTEN` (`host:port`) and refuses anything but a loopback address. */
import { isLoopbackHost } from "@tackle/core";
import { CliError } from "../program/cli-error.ts";

export { isLoopbackHost };

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

export const defaultConsoleListen = "127.0.0.1:4270";

export function parseListen(value: string = defaultConsoleListen): ListenAddress {
  const match = /^(\[[^\]]+\]|[^:]+|[0-9a-fA-F:]+(?=:\d+$)):(\d{1,5})$/.exec(value.trim());
  const port = match === null ? Number.NaN : Number(match[2]);
  if (match === null || !Number.isInteger(port) || port > 65_535) {
    throw new CliError(
      "invalid_listen",
      `MESH_CONSOLE_LISTEN=${value} is not host:port (for example ${defaultConsoleListen})`,
      { exitCode: 2 },
    );
  }
  const host = match[1]!;
  if (!isLoopbackHost(host)) {
    throw new CliError(
      "not_loopback",
      `MESH_CONSOLE_LISTEN=${value} refused: the console answers on loopback only (127.0.0.1, ::1 or localhost), because anyone who reaches it can call every tool. Use ${defaultConsoleListen} or another loopback address.`,
      { exitCode: 2 },
    );
  }
  const bare = host.startsWith("[") ? host.slice(1, -1) : host;
  return { host: bare, port };
}
