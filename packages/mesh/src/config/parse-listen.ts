/** The one reader of a listen address (`MESH_CONSOLE_LISTEN`, `tackle serve --listen`): `host:port` on loopback. */
import { isLoopbackHost } from "@tackle/core/internal";
import { MeshConfigError } from "../errors/mesh-config-error.ts";

export interface ListenAddress {
  /** Bare host: `127.0.0.1`, `localhost` or `::1` (no brackets). */
  readonly host: string;
  readonly port: number;
}

export const DEFAULT_CONSOLE_LISTEN: ListenAddress = Object.freeze({ host: "127.0.0.1", port: 4270 });
const example = "127.0.0.1:4270";

/**
 * Reads `host:port` (`[::1]:port` for IPv6). Empty or absent gives the default, 127.0.0.1:4270. A
 * malformed value, a port above 65535, or a host that is not loopback is refused with a
 * MeshConfigError naming `variable` and the fix: whoever reaches the console can call every tool.
 */
export function parseListenAddress(
  value: string | undefined,
  variable = "MESH_CONSOLE_LISTEN",
): ListenAddress {
  const given = value?.trim() ?? "";
  if (given === "") return DEFAULT_CONSOLE_LISTEN;
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(given);
  const host = match?.[1] ?? match?.[2];
  const port = Number(match?.[3]);
  if (match === null || host === undefined || !Number.isInteger(port) || port > 65_535) {
    throw new MeshConfigError(
      variable,
      `${JSON.stringify(given)} is not host:port (for example ${example} or [::1]:4270)`,
    );
  }
  if (!isLoopbackHost(host)) {
    throw new MeshConfigError(
      variable,
      `${given} refused: the console answers on loopback only (127.0.0.1, ::1 or localhost), because anyone who reaches it can call every tool. Use ${example} or another loopback address.`,
    );
  }
  return { host, port };
}

/** `host:port` again, bracketing an IPv6 host. */
export function formatListenAddress(address: ListenAddress): string {
  return `${address.host.includes(":") ? `[${address.host}]` : address.host}:${address.port}`;
}
