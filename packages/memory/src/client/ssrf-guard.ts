/**
 * The client's SSRF guard: only http and https, and no private, loopback, link-local or otherwise
 * special address unless the caller allows the private network. Names are checked after DNS, at
 * connect time, so a name that later resolves elsewhere (DNS rebinding) is caught too.
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP } from "node:net";
import { SsrfRefusedError } from "../errors/ssrf-refused-error.ts";

function ipv4Number(address: string): number {
  return address.split(".").reduce((value, part) => value * 256 + Number(part), 0);
}

const blockedIpv4: readonly [string, number][] = [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
];

function blockedV4(address: string): boolean {
  const value = ipv4Number(address);
  return blockedIpv4.some(([base, bits]) => {
    const size = 2 ** (32 - bits);
    const start = ipv4Number(base);
    return value >= start && value < start + size;
  });
}

function expandIpv6(address: string): number[] {
  let text = address.toLowerCase().split("%")[0]!;
  const embedded = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (embedded) {
    const value = ipv4Number(embedded[1]!);
    text = `${text.slice(0, -embedded[1]!.length)}${(value >>> 16).toString(16)}:${(value & 0xffff).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const headParts = head.length > 0 ? head.split(":") : [];
  const tailParts = tail !== undefined && tail.length > 0 ? tail.split(":") : [];
  const missing = 8 - headParts.length - tailParts.length;
  const groups = [...headParts, ...(tail === undefined ? [] : Array(missing).fill("0")), ...tailParts];
  return groups.map((group) => Number.parseInt(group || "0", 16));
}

function blockedV6(address: string): boolean {
  const groups = expandIpv6(address);
  const [first = 0] = groups;
  if (groups.every((group) => group === 0)) return true; // ::
  if (groups.slice(0, 7).every((group) => group === 0) && groups[7] === 1) return true; // ::1
  const embeddedV4 = () => `${groups[6]! >> 8}.${groups[6]! & 255}.${groups[7]! >> 8}.${groups[7]! & 255}`;
  if (groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff)
    return blockedV4(embeddedV4()); // mapped
  if (first === 0x64 && groups[1] === 0xff9b) return blockedV4(embeddedV4()); // NAT64
  if ((first & 0xfe00) === 0xfc00) return true; // unique local
  if ((first & 0xffc0) === 0xfe80) return true; // link-local
  if ((first & 0xff00) === 0xff00) return true; // multicast
  if (first === 0x2001 && groups[1] === 0x0db8) return true; // documentation
  return false;
}

/** True for an address the guard refuses without `allowPrivateNetwork`. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blockedV4(address);
  if (family === 6) return blockedV6(address);
  return true;
}

/** Checks a URL before any connection: scheme, and the host when it is an IP literal or `localhost`. */
export function checkUrl(url: URL, allowPrivateNetwork: boolean): void {
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new SsrfRefusedError(url.origin, `only http and https are allowed, not ${url.protocol}`);
  }
  if (allowPrivateNetwork) return;
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (host === "localhost" || host.endsWith(".localhost")) {
    throw new SsrfRefusedError(url.origin, "localhost is a loopback address");
  }
  if (isIP(host) !== 0 && isPrivateAddress(host)) {
    throw new SsrfRefusedError(url.origin, `${host} is a private, loopback or link-local address`);
  }
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** A `lookup` for `http.request` that refuses a name resolving to any private address. */
export function guardedLookup(origin: string) {
  return (hostname: string, options: { all?: boolean; family?: number }, callback: LookupCallback): void => {
    dnsLookup(hostname, { family: options.family ?? 0, all: true }, (error, addresses) => {
      if (error) return callback(error, []);
      const refused = addresses.find((entry) => isPrivateAddress(entry.address));
      if (refused) {
        return callback(
          new SsrfRefusedError(
            origin,
            `${hostname} resolves to ${refused.address}, a private address`,
          ) as never,
          [],
        );
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    });
  };
}
