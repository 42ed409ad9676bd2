/**
 * The video assistant's processes, started the way the README starts them by hand: the mesh's
 * authority (`tackle mesh init`), one credential per node and one for the driver (`tackle mesh issue`,
 * `issue-client`), two `tackle serve` nodes — `studio` (memory and docscript) and `speech` (the Python
 * transcription bundle) — and the driver (`driver.ts`). The broker is the caller's: a `nats-server` in
 * operator mode on the authority's `server.conf`. Used by the example's test and by `bench/soak`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { underLoadMs } from "@tackle/test-support";

const here = (name: string) => fileURLToPath(new URL(`./${name}`, import.meta.url));
const tackleBin = fileURLToPath(new URL("../../packages/cli/bin/tackle.js", import.meta.url));

export type NodeName = "studio" | "speech";

/** Where each part keeps its files, all under one folder. */
export interface StackLayout {
  readonly root: string;
  /** The issuer's TACKLE_HOME; the authority is in `<issuerHome>/mesh`. */
  readonly issuerHome: string;
  readonly serverConfig: string;
  readonly issuerCreds: string;
  readonly creds: Readonly<Record<NodeName | "assistant", string>>;
  readonly homes: Readonly<Record<NodeName, string>>;
  /** The driver's journal. */
  readonly journal: string;
  /** One line per execution of the transcription tool (the Python child writes it). */
  readonly transcriptionLog: string;
}

export function stackLayout(root: string): StackLayout {
  const issuerHome = join(root, "issuer");
  const homes = { studio: join(root, "studio"), speech: join(root, "speech") };
  for (const directory of [issuerHome, ...Object.values(homes)])
    mkdirSync(directory, { recursive: true, mode: 0o700 });
  return {
    root,
    issuerHome,
    serverConfig: join(issuerHome, "mesh", "server.conf"),
    issuerCreds: join(issuerHome, "mesh", "issuer.creds"),
    creds: {
      studio: join(root, "studio.creds"),
      speech: join(root, "speech.creds"),
      assistant: join(root, "assistant.creds"),
    },
    homes,
    journal: join(root, "assistant.sqlite"),
    transcriptionLog: join(homes.speech, "transcriptions.log"),
  };
}

/** The caller's environment without its Tackle and mesh settings, plus `extra`. */
function environment(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!/^(MESH_|TACKLE_|DOCSCRIPT_|ASSISTANT_)/.test(key) && key !== "NODE_OPTIONS") env[key] = value;
  return { ...env, TACKLE_LOG_LEVEL: "warn", ...extra };
}

/** Runs one `tackle` command to its end (60 s at most on a quiet machine, more under load); rejects when it fails. */
export function tackle(args: readonly string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--conditions=@tackle/source", tackleBin, ...args], {
      env: environment(env),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), underLoadMs(60_000));
    child.once("close", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`tackle ${args.join(" ")} exited ${code}: ${output}`));
    });
  });
}

/** `tackle mesh init`: the operator, the account and `server.conf` for the broker. */
export async function initAuthority(layout: StackLayout): Promise<void> {
  await tackle(["mesh", "init"], { TACKLE_HOME: layout.issuerHome });
}

/** Places the modules on their nodes and writes each node's credential and the driver's. */
export async function issueCredentials(layout: StackLayout, brokerUrl: string): Promise<void> {
  const issuer = {
    TACKLE_HOME: layout.issuerHome,
    MESH_BROKER_URL: brokerUrl,
    MESH_BROKER_FILE: layout.issuerCreds,
  };
  await tackle(["mesh", "issue", "studio", "memory"], issuer);
  // The studio's credential reaches both of its modules (every membership it holds when issued).
  await tackle(["mesh", "issue", "studio", "docscript", "--creds", layout.creds.studio], issuer);
  await tackle(["mesh", "issue", "speech", "transcribe", "--creds", layout.creds.speech], issuer);
  await tackle(
    [
      "mesh",
      "issue-client",
      "assistant",
      "--call",
      "memory",
      "--call",
      "docscript",
      "--call",
      "transcribe",
      "--creds",
      layout.creds.assistant,
    ],
    issuer,
  );
}

/** A started process: its pid, its stderr's tail, and a way to end it. */
export interface Proc {
  readonly child: ChildProcess;
  /** What it printed on stdout up to its ready line. */
  readonly banner: string;
  stderr(): string;
  /** Sends the signal and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

function start(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  ready: (stdout: string) => boolean,
): Promise<Proc> {
  const child = spawn(process.execPath, ["--conditions=@tackle/source", ...args], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-65_536);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const proc: Proc = {
    child,
    get banner() {
      return stdout;
    },
    stderr: () => stderr,
    async stop(signal = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
  return new Promise((resolve, reject) => {
    const readyMs = underLoadMs(120_000);
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${args.join(" ")} not ready in ${readyMs / 1000} s: ${stdout}\n${stderr}`));
    }, readyMs);
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on("line", (line) => {
      stdout += `${line}\n`;
      if (!ready(stdout)) return;
      clearTimeout(timer);
      resolve(proc);
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`${args.join(" ")} exited before it was ready: ${stdout}\n${stderr}`));
    });
  });
}

/** The modules each node serves (`MESH_TOOL_MODULES`). */
function modulesOf(node: NodeName): string {
  if (node === "speech") return `transcribe=${here("transcribe.py")}`;
  const memory = fileURLToPath(import.meta.resolve("@tackle/memory/module"));
  const docscript = fileURLToPath(import.meta.resolve("@tackle/docscript/module"));
  return `memory=${memory},docscript=${docscript}`;
}

/** `tackle serve --no-console` as the node, on its own credential; ready once every module is `ok`. */
export function startNode(layout: StackLayout, node: NodeName, brokerUrl: string): Promise<Proc> {
  const home = layout.homes[node];
  const env = environment({
    MESH_NODE: node,
    MESH_BROKER_URL: brokerUrl,
    MESH_BROKER_FILE: layout.creds[node],
    MESH_TOOL_MODULES: modulesOf(node),
    TACKLE_HOME: home,
    // The studio keeps its timeline across restarts; the speech node's child writes its log in HOME.
    DOCSCRIPT_DATABASE: join(home, "timeline.sqlite"),
    ...(node === "speech" ? { HOME: home } : {}),
  });
  const modules = node === "speech" ? ["transcribe"] : ["memory", "docscript"];
  return start([tackleBin, "serve", "--no-console"], env, (stdout) =>
    modules.every((module) => new RegExp(`module ${module}: ok`).test(stdout)),
  );
}

/** The driver (`driver.ts`) on the client credential; `url` is its durable HTTP API. */
export async function startDriver(
  layout: StackLayout,
  brokerUrl: string,
  options: { port?: number; leaseMs?: number; transcribeSeconds?: number } = {},
): Promise<Proc & { url: string }> {
  const proc = await start(
    [here("driver.ts")],
    environment({
      MESH_BROKER_URL: brokerUrl,
      MESH_BROKER_FILE: layout.creds.assistant,
      ASSISTANT_STORE: layout.journal,
      ASSISTANT_PORT: String(options.port ?? 0),
      ASSISTANT_LEASE_MS: String(options.leaseMs ?? 5000),
      ASSISTANT_TRANSCRIBE_SECONDS: String(options.transcribeSeconds ?? 0.3),
    }),
    (stdout) => /^ready /m.test(stdout),
  );
  const url = /^ready (\S+)$/m.exec(proc.banner)?.[1] ?? "";
  return Object.assign(proc, { url });
}
