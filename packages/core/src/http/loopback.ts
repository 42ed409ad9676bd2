/**
 * Loopback checks every Tackle HTTP server shares: bind only to loopback, and answer only requests
 * addressed to loopback (a foreign `Host` or `Origin` is DNS rebinding or a cross-site page).
 */
import { isIP } from "node:net";

/** True for `localhost`, any `127.x.y.z` address and `::1` (bracketed or not); never for a DNS name. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  if (bare.toLowerCase() === "localhost") return true;
  if (isIP(bare) === 4) return bare.startsWith("127.");
  if (isIP(bare) === 6) return bare === "::1" || bare === "0:0:0:0:0:0:0:1";
  return false;
}

/** Why a request must be refused (403), or undefined when its `Host` and `Origin` are loopback. */
export function loopbackViolation(headers: Headers): string | undefined {
  const host = headers.get("host");
  if (host === null || !isLoopbackHost(hostnameOf(host))) {
    return `Host ${JSON.stringify(host ?? "")} is not loopback; this server answers only requests addressed to 127.0.0.1, ::1 or localhost`;
  }
  const origin = headers.get("origin");
  if (origin === null) return undefined;
  let hostname: string;
  try {
    hostname = new URL(origin).hostname;
  } catch {
    return `Origin ${JSON.stringify(origin)} is not a loopback origin`;
  }
  return isLoopbackHost(hostname) ? undefined : `Origin ${JSON.stringify(origin)} is not a loopback origin`;
}

/** `host[:port]` or `[v6][:port]` without the port. */
function hostnameOf(host: string): string {
  if (host.startsWith("[")) {
    const end = host.indexOf("]");
    return end === -1 ? host : host.slice(0, end + 1);
  }
  const colon = host.lastIndexOf(":");
  return colon === -1 ? host : host.slice(0, colon);
}
