import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/** The first port of the kernel's ephemeral range, read once. */
let ephemeralStart: number | undefined;

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, for a server a test starts later (or starts
 * again after killing it). Taken below the kernel's ephemeral range: ports in that range are handed
 * to every outgoing connection and every listener on port 0, so one picked there can be taken between
 * the pick and the server's bind (the soak once lost a memory service to EADDRINUSE that way).
 */
export async function freePort(): Promise<number> {
  ephemeralStart ??= ephemeralLow();
  const low = ephemeralStart;
  const span = Math.min(12_000, low - 10_000);
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = low - 1 - Math.floor(Math.random() * span);
    if (await canListen(port)) return port;
  }
  return listenAndRelease(0);
}

/** The first port of the kernel's ephemeral range (Linux's default when it cannot be read). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 20_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

function canListen(port: number): Promise<boolean> {
  return listenAndRelease(port).then(
    () => true,
    () => false,
  );
}

function listenAndRelease(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}
