/**
 * `tackle serve --builtin` embedded listens on nothing but loopback: every LISTEN socket owned by the
 * serve process (or a process it started), read from /proc, is bound to 127.0.0.1 or ::1 — the
 * console and whatever servers the built-in modules (memory, docscript) open.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { after, before, test } from "node:test";
import { freePort } from "@tackle/test-support";
import { cleanEnv, type ServeProcess, startServe, tempHome } from "./tackle-process.ts";

interface Listening {
  readonly address: string;
  readonly port: number;
  readonly loopback: boolean;
}

/** The process and all its descendants, from each /proc/<pid>/stat's parent pid. */
function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // Fields after the command name (which may hold spaces and parentheses): state, ppid, …
      const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(name)]);
    } catch {} // the process ended while we looked
  }
  const tree = [root];
  for (let index = 0; index < tree.length; index++) tree.push(...(children.get(tree[index] ?? -1) ?? []));
  return tree;
}

function socketInodes(pids: readonly number[]): Set<string> {
  const inodes = new Set<string>();
  for (const pid of pids) {
    let descriptors: string[];
    try {
      descriptors = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const descriptor of descriptors) {
      try {
        const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${descriptor}`));
        if (match?.[1] !== undefined) inodes.add(match[1]);
      } catch {}
    }
  }
  return inodes;
}

/** /proc/net/tcp{,6} store each 32-bit word of the address in host (little-endian) byte order. */
function addressBytes(hex: string): number[] {
  const bytes: number[] = [];
  for (let word = 0; word < hex.length; word += 8) {
    const chunk = hex.slice(word, word + 8);
    for (let byte = 6; byte >= 0; byte -= 2) bytes.push(Number.parseInt(chunk.slice(byte, byte + 2), 16));
  }
  return bytes;
}

function describeAddress(bytes: readonly number[]): { address: string; loopback: boolean } {
  if (bytes.length === 4) return { address: bytes.join("."), loopback: bytes.join(".") === "127.0.0.1" };
  const groups = Array.from({ length: 8 }, (_, index) =>
    (((bytes[index * 2] ?? 0) << 8) | (bytes[index * 2 + 1] ?? 0)).toString(16),
  );
  const address = groups.join(":");
  return { address, loopback: address === "0:0:0:0:0:0:0:1" };
}

function listeningSockets(pid: number): Listening[] {
  const inodes = socketInodes(processTree(pid));
  const found: Listening[] = [];
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of readFileSync(table, "utf8").trim().split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      const [hexAddress, hexPort] = (fields[1] ?? "").split(":");
      // State 0A is LISTEN; field 9 is the socket's inode.
      if (fields[3] !== "0A" || !inodes.has(fields[9] ?? "")) continue;
      found.push({
        ...describeAddress(addressBytes(hexAddress ?? "")),
        port: Number.parseInt(hexPort ?? "", 16),
      });
    }
  }
  return found;
}

const home = tempHome();
let serve: ServeProcess;
let port: number;
before(async () => {
  port = await freePort();
  serve = await startServe(
    ["--builtin"],
    cleanEnv({ TACKLE_HOME: home.path, MESH_CONSOLE_LISTEN: `127.0.0.1:${port}` }),
  );
});
after(async () => {
  await serve?.stop();
  home.remove();
});

test("tackle serve --builtin (embedded) listens on loopback only, console and built-in modules alike", () => {
  assert.match(serve.banner, /^ {2}module memory: ok\b/m);
  assert.match(serve.banner, /^ {2}module docscript: ok\b/m);
  const pid = serve.child.pid;
  assert.ok(pid !== undefined);
  const sockets = listeningSockets(pid);
  assert.ok(
    sockets.some((socket) => socket.port === port),
    `the console's port ${port} is among the listening sockets: ${JSON.stringify(sockets)}`,
  );
  assert.deepEqual(
    sockets.filter((socket) => !socket.loopback),
    [],
    `every listening socket is loopback: ${JSON.stringify(sockets)}`,
  );
});
