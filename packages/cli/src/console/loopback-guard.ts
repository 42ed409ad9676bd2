/** DNS-rebinding guard: a request whose `Host` or `Origin` names anything but loopback gets 403. */
import { isLoopbackHost } from "./parse-listen.ts";

/** The reason a request is refused, or undefined when its Host and Origin are loopback. */
export function loopbackViolation(headers: Headers): string | undefined {
  const host = headers.get("host");
  if (host === null || !isLoopbackHost(hostnameOf(host))) {
    return `Host ${JSON.stringify(host ?? "")} is not loopback; the console answers only requests addressed to 127.0.0.1, ::1 or localhost`;
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
