/**
 * The README's "Run the service" and "A session with curl", run as written: the service started by
 * the `tackle-memory` bin from this checkout (the file `npx tackle-memory` runs), then each curl line
 * of the session in bash, with only the port changed.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { memoryRoutes } from "@tackle/memory/server";
import { freePort } from "@tackle/test-support";

const run = promisify(execFile);
const readme = readFileSync(fileURLToPath(new URL("../README.md", import.meta.url)), "utf8");
const bin = fileURLToPath(new URL("../../../node_modules/.bin/tackle-memory", import.meta.url));

/** The commands of the first sh block after `marker`, continuation lines joined, comments dropped. */
function commandsAfter(marker: string): string[] {
  const from = readme.indexOf(marker);
  assert.ok(from >= 0, `the README has ${marker}`);
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(from))?.[1] ?? "";
  return block
    .replace(/\\\n\s*/g, "")
    .split("\n")
    .map((line) => line.replace(/\s+#.*$/, "").trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
}

describe("the README's service session", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-readme-"));
  let child: ChildProcess | undefined;
  after(async () => {
    if (child !== undefined && child.exitCode === null) {
      const exited = new Promise((resolve) => child!.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    }
    rmSync(directory, { recursive: true, force: true });
  });

  it("npx tackle-memory serve starts from the checkout, and the curl session answers as shown", async () => {
    const port = String(await freePort());
    const serveLine = commandsAfter("## Run the service").find((line) => line.includes("--listen"));
    assert.ok(serveLine?.startsWith("npx tackle-memory serve"), serveLine);
    const args = serveLine!.replace("npx tackle-memory", "").replaceAll("4280", port).trim().split(/\s+/);
    // A system Node older than 24 first on PATH, as on a fresh machine: the bin finds the workspace's own.
    child = spawn(bin, args, {
      cwd: directory,
      env: { PATH: `/usr/bin:/bin:${process.env.PATH ?? ""}`, HOME: directory },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (chunk) => {
      stderr += String(chunk);
    });
    const listening = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the service did not start: ${stderr}`)), 60_000);
      child!.once("exit", (code) => reject(new Error(`the service exited with ${code}: ${stderr}`)));
      createInterface({ input: child!.stdout! }).on("line", (line) => {
        const url = (JSON.parse(line) as { listening?: string }).listening;
        if (url !== undefined) {
          clearTimeout(timer);
          resolve(url);
        }
      });
    });
    assert.equal(listening, `http://127.0.0.1:${port}`);

    const [keyLine, ...curls] = commandsAfter("<!-- curl-session -->");
    assert.match(keyLine!, /^KEY=\$\(cat \.tackle\/memory-api-key\)$/);
    const answers: unknown[] = [];
    for (const command of curls) {
      assert.match(command, /^curl -s /);
      const script = `${keyLine}; ${command.replaceAll("4280", port)} -w '\\n%{http_code}'`;
      const { stdout } = await run("bash", ["-c", script], { cwd: directory, timeout: 30_000 });
      const lines = stdout.trimEnd().split("\n");
      const status = Number(lines.pop());
      answers.push({ status, body: JSON.parse(lines.join("\n")) as unknown });
    }
    type Answer = {
      status: number;
      body: {
        created?: boolean;
        results?: { memory: { content: string } }[];
        error?: { message: string };
      };
    };
    const [added, found, unnamed, whole, notJson] = answers as Answer[];
    assert.equal(added!.status, 200);
    assert.equal(added!.body.created, true);
    assert.equal(found!.body.results?.[0]?.memory.content, "Ada prefers window seats on long flights.");
    assert.equal(unnamed!.status, 400);
    assert.match(unnamed!.body.error?.message ?? "", /send wholeTenant: true/);
    assert.equal(whole!.status, 200);
    assert.equal(whole!.body.results?.length, 1);
    assert.equal(notJson!.status, 415);
    assert.match(notJson!.body.error?.message ?? "", /Send the body as JSON/);
  });

  it("the README lists every route", () => {
    const listed = readme.slice(readme.indexOf("<!-- routes -->"));
    for (const route of memoryRoutes) {
      assert.ok(
        listed.includes(`| \`${route.method.toUpperCase()} ${route.path}\` | \`${route.operationId}\` |`),
        `${route.operationId} is listed`,
      );
    }
  });
});
