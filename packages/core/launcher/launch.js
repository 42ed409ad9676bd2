// Starts a Tackle command (`tackle`, `tackle-memory`). A build (`dist/…`) runs as is; in a checkout,
// without a build, the TypeScript source runs straight under Node 24 with the `@tackle/source` export
// condition. When the Node that started the command is older than 24 (a system node on PATH), the
// workspace's pinned Node 24 runs it. Plain JavaScript that any Node since 18 parses, so the version
// check itself never fails. Internal to Tackle's packages: not a public API.
import { spawn } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/**
 * @param {{ name: string, binUrl: string, built: string, source: string }} command
 *   `binUrl` is the bin file's `import.meta.url`; `built` and `source` are paths in its package.
 */
export async function launch(command) {
  const packageDir = dirname(dirname(realpathSync(fileURLToPath(command.binUrl))));
  const built = join(packageDir, command.built);
  const source = join(packageDir, command.source);
  const fromSource = !existsSync(built) || process.env.TACKLE_FROM_SOURCE === "1";
  const major = Number(process.versions.node.split(".")[0]);
  if (major >= 24) {
    if (fromSource) await enableSourceCondition();
    await import(pathToFileURL(fromSource ? source : built).href);
  } else {
    const node = findNode24(command.name, packageDir);
    reexec(command.name, node, [
      ...(fromSource ? ["--conditions=@tackle/source"] : []),
      fromSource ? source : built,
    ]);
  }
}

/** Adds the `@tackle/source` condition to every resolution in this process, as the flag would. */
async function enableSourceCondition() {
  if (process.execArgv.some((flag) => flag.includes("@tackle/source"))) return;
  const { registerHooks } = await import("node:module");
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const conditions = context.conditions.includes("@tackle/source")
        ? context.conditions
        : ["@tackle/source", ...context.conditions];
      return nextResolve(specifier, { ...context, conditions });
    },
  });
}

/** The `node` package the workspace pins (node_modules/node/bin/node), searched upward from the package. */
function findNode24(name, packageDir) {
  for (let directory = packageDir; ; directory = dirname(directory)) {
    const candidate = join(directory, "node_modules", "node", "bin", "node");
    if (existsSync(candidate)) return candidate;
    if (dirname(directory) === directory) break;
  }
  process.stderr.write(
    `${name}: needs Node.js 24 or newer, and this is ${process.version}. Install Node 24, or run it through npm (npx ${name}), which puts the workspace's Node 24 first.\n`,
  );
  process.exit(1);
}

function reexec(name, node, args) {
  const child = spawn(node, [...args, ...process.argv.slice(2)], { stdio: "inherit" });
  // A terminal's Ctrl+C already reaches the child (same process group); anything else is forwarded.
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.on(signal, () => {
      if (signal === "SIGINT" && process.stdin.isTTY) return;
      child.kill(signal);
    });
  }
  child.on("exit", (code, signal) => process.exit(code ?? 128 + (signal === "SIGINT" ? 2 : 15)));
  child.on("error", (error) => {
    process.stderr.write(`${name}: cannot start ${node}: ${error.message}\n`);
    process.exit(1);
  });
}
