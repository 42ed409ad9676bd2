/**
 * The packages as a user gets them: every public package built and packed as a release would be
 * (pack-packages.ts), each tarball passing publint and arethetypeswrong (ESM-only profile), then all of
 * them installed from the tarballs into a fresh project outside the workspace, where each package
 * README's quickstart (its first TypeScript block) type-checks against the installed `.d.ts` under
 * strict settings and runs, and the installed `tackle serve --builtin` serves MCP on loopback.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { freePort, testTimeoutMs, underLoadMs } from "@tackle/test-support";
import { extractSnippets } from "../readme-snippets.ts";
import { apiReportsOf } from "./api-reports.ts";
import { type PackedPackage, packPublicPackages, publicPackages, repositoryRoot } from "./pack-packages.ts";
import { consumerEnv, quickstartRuns, startGroup } from "./quickstart-runs.ts";

const scratch = mkdtempSync(path.join(tmpdir(), "tackle-consumer-"));
const consumer = path.join(scratch, "consumer");
let packed: PackedPackage[] = [];
const bin = (name: string) => path.join(repositoryRoot, "node_modules", ...name.split("/"));

function run(
  command: string,
  args: readonly string[],
  cwd: string,
  env: NodeJS.ProcessEnv = consumerEnv(),
): string {
  try {
    return execFileSync(command, args, {
      cwd,
      encoding: "utf8",
      timeout: underLoadMs(600_000),
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(
      `${command} ${args.join(" ")} failed:\n${failed.stdout ?? ""}${failed.stderr ?? failed.message}`,
    );
  }
}

/** The first TypeScript block of a package's README, with the preamble written before it. */
function quickstart(name: string): { preamble: string; code: string } {
  const readme = path.join(repositoryRoot, "packages", name, "README.md");
  const [first] = extractSnippets(readme, readFileSync(readme, "utf8"));
  if (first === undefined) throw new Error(`packages/${name}/README.md has no TypeScript block`);
  return first;
}

describe("the packages installed from their tarballs into a project outside the workspace", {
  timeout: testTimeoutMs(1_500_000),
}, () => {
  before(() => {
    packed = packPublicPackages(scratch);
    mkdirSync(consumer);
    const tarballs = Object.fromEntries(packed.map((entry) => [entry.name, `file:${entry.tarball}`]));
    const manifest = {
      name: "tackle-consumer",
      private: true,
      type: "module",
      dependencies: { ...tarballs, zod: "^4.6.7", "@types/node": "^24.19.4" },
      // The packages name each other by version; here those versions are the tarballs.
      overrides: tarballs,
    };
    writeFileSync(path.join(consumer, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
    run(
      "npm",
      ["install", "--no-audit", "--no-fund", "--prefer-offline"],
      consumer,
      consumerEnv({ npm_config_loglevel: "error" }),
    );
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  it("every tarball passes publint and arethetypeswrong (ESM only)", () => {
    assert.equal(packed.length, publicPackages.length);
    for (const entry of packed) {
      const publint = run(
        process.execPath,
        [bin("publint/src/cli.js"), "run", entry.tarball, "--strict"],
        scratch,
      );
      assert.match(publint, /All good!/, `${entry.name}: ${publint}`);
      // Exits non-zero on any problem outside the ignored CommonJS resolutions.
      run(
        process.execPath,
        [bin("@arethetypeswrong/cli/dist/index.js"), entry.tarball, "--profile", "esm-only"],
        scratch,
      );
    }
  });

  it("every package's public surface matches its checked-in API report (npm run api-report)", () => {
    const stale: string[] = [];
    for (const entry of packed) {
      for (const report of apiReportsOf(entry.folder, entry.directory)) {
        const kept = path.join(repositoryRoot, report.file);
        if (!existsSync(kept) || readFileSync(kept, "utf8") !== report.text) stale.push(report.file);
      }
    }
    assert.deepEqual(
      stale,
      [],
      "the surface changed without its report: run npm run api-report and commit the reports",
    );
  });

  it("every tarball holds dist (ESM and .d.ts), the licence and the README, and no tests", () => {
    for (const entry of packed) {
      const files = run("tar", ["-tzf", entry.tarball], scratch).split("\n");
      for (const wanted of [
        "package/dist/index.js",
        "package/dist/index.d.ts",
        "package/LICENSE",
        "package/README.md",
      ])
        assert.ok(files.includes(wanted), `${entry.name} lacks ${wanted}`);
      assert.deepEqual(
        files.filter((file) => file.endsWith(".test.ts")),
        [],
        `${entry.name} ships tests`,
      );
    }
  });

  quickstartTests();
});

/** In the installed project: each README's quickstart type-checks and runs, and the installed bin serves. */
function quickstartTests(): void {
  it("each package README's quickstart type-checks against the installed types, strict", () => {
    const files: string[] = [];
    for (const name of publicPackages) {
      const { preamble, code } = quickstart(name);
      const file = `check-${name}.ts`;
      writeFileSync(path.join(consumer, file), `${preamble}\n${code}\nexport {};\n`);
      files.push(file);
    }
    const tsconfig = {
      compilerOptions: {
        target: "es2024",
        lib: ["esnext", "dom"],
        module: "nodenext",
        moduleResolution: "nodenext",
        types: ["node"],
        strict: true,
        exactOptionalPropertyTypes: true,
        noUncheckedIndexedAccess: true,
        skipLibCheck: true,
        noEmit: true,
      },
      files,
    };
    writeFileSync(path.join(consumer, "tsconfig.json"), JSON.stringify(tsconfig));
    run(process.execPath, [bin("typescript/bin/tsc"), "-p", "tsconfig.json"], consumer);
  });

  // The cli's quickstart is a command; it runs in the serve test below, with its README's MCP client.
  for (const name of publicPackages.filter((entry) => entry !== "cli")) {
    it(`the ${name} quickstart runs`, async () => {
      const { code } = quickstart(name);
      await quickstartRuns(name, code, consumer);
    });
  }

  it("the installed bin serves: npx tackle serve --builtin, its console answers tackle and the README's MCP client", async () => {
    const home = path.join(scratch, "home");
    const port = await freePort();
    const env = consumerEnv({
      HOME: home,
      TACKLE_HOME: path.join(home, ".tackle"),
      MESH_CONSOLE_LISTEN: `127.0.0.1:${port}`,
    });
    const { child: server, stop } = startGroup(["tackle", "serve", "--builtin"], consumer, env);
    try {
      const console = await new Promise<string>((resolve, reject) => {
        let output = "";
        const timer = setTimeout(
          () => reject(new Error(`tackle serve did not start:\n${output}`)),
          underLoadMs(120_000),
        );
        const read = (chunk: Buffer) => {
          output += chunk.toString();
          const url = /^console (\S+)$/m.exec(output)?.[1];
          if (url !== undefined) {
            clearTimeout(timer);
            resolve(url);
          }
        };
        server.stdout.on("data", read);
        server.stderr.on("data", read);
        server.once("exit", (code) => reject(new Error(`tackle serve exited ${code}:\n${output}`)));
      });
      const listing = run("npx", ["tackle", "tools", "--console", console], consumer, env);
      assert.match(listing, /demo/);
      const sum = run(
        "npx",
        ["tackle", "call", "demo.add", '{"numbers":[2,40]}', "--console", console],
        consumer,
        env,
      );
      assert.match(sum, /42/);
      // The cli README's MCP client, pointed at this console.
      const client = quickstart("cli").code.replaceAll("http://127.0.0.1:4270/mcp", console);
      writeFileSync(path.join(consumer, "run-cli.ts"), client);
      assert.match(run(process.execPath, ["run-cli.ts"], consumer, env), /hi/);
    } finally {
      await stop();
    }
  });
}
