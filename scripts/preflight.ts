/**
 * Before the suites run, `npm test` makes sure the servers they talk to are there: `nats-server` on PATH,
 * PostgreSQL at TACKLE_TEST_PG and Chromium for the console's browser tests. As root on a machine that
 * lacks one, it runs scripts/ensure-services.sh (Debian's packages) and carries the settings that script
 * changed into the run; without root it stops at once and names the one command to run. A suite whose
 * server is missing would fail anyway, minutes later and one at a time; this says it once, up front.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

const ensureScript = path.join(import.meta.dirname, "ensure-services.sh");
const setupCommand = `sudo bash ${path.relative(process.cwd(), ensureScript) || ensureScript}`;

function natsServerFound(): boolean {
  if (existsSync("/usr/sbin/nats-server")) return true;
  return spawnSync("nats-server", ["--version"], { stdio: "ignore" }).status === 0;
}

function chromiumFound(): boolean {
  return existsSync(process.env.TACKLE_CHROMIUM ?? "/usr/bin/chromium");
}

/** A TCP connection to TACKLE_TEST_PG's host and port within 5 s (the suites check the login themselves). */
function postgresListens(): Promise<boolean> {
  const url = new URL(process.env.TACKLE_TEST_PG ?? "postgres://postgres@127.0.0.1:5432/test");
  return new Promise((resolve) => {
    const socket = net.connect({ host: url.hostname || "127.0.0.1", port: Number(url.port || 5432) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(5_000, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/** What is missing, by name; empty when every server the suites use is there. */
export async function missingServices(): Promise<string[]> {
  const missing: string[] = [];
  if (!natsServerFound()) missing.push("nats-server");
  if (!(await postgresListens())) missing.push("PostgreSQL");
  if (!chromiumFound()) missing.push("Chromium");
  return missing;
}

/** `export NAME='value'` lines, as ensure-services.sh writes them, into `env`. */
function applyExports(text: string, env: NodeJS.ProcessEnv): void {
  for (const line of text.split("\n")) {
    const match = /^export ([A-Z_][A-Z0-9_]*)='([^']*)'$/.exec(line.trim());
    if (match?.[1] !== undefined) env[match[1]] = match[2];
  }
}

/**
 * Sets up what is missing (as root) or explains what to run (otherwise). Returns a message to print and
 * stop on, or undefined when the suites can run.
 */
export async function preflight(env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  if (env.TACKLE_TEST_NO_SETUP === "1") return undefined;
  const missing = await missingServices();
  if (missing.length === 0) return undefined;
  if (process.getuid?.() !== 0) {
    return `The test suites need ${missing.join(", ")}, which this machine lacks. Run once:\n  ${setupCommand}\nthen npm test again.`;
  }
  process.stdout.write(`npm test: ${missing.join(", ")} missing; running ${ensureScript}\n`);
  const dir = mkdtempSync(path.join(tmpdir(), "tackle-preflight-"));
  try {
    const envFile = path.join(dir, "env");
    const setup = spawnSync("bash", [ensureScript, envFile], { stdio: "inherit", timeout: 900_000 });
    if (setup.status !== 0) return `${ensureScript} failed (exit ${setup.status ?? setup.signal}).`;
    if (existsSync(envFile)) applyExports(readFileSync(envFile, "utf8"), env);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const still = await missingServices();
  if (still.length > 0) return `Still missing after ${ensureScript}: ${still.join(", ")}.`;
  return undefined;
}
