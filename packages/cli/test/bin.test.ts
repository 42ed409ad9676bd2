/** The `tackle` bin in this workspace: on Node 24 in process, from an older system Node by re-exec, and via npx. */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import { test } from "node:test";
import { cleanEnv, repoRoot, runTackle } from "./tackle-process.ts";

const linkedBin = join(repoRoot, "node_modules", ".bin", "tackle");

/** A `node` on PATH that is not the workspace's pinned one (the system Node 20 on our machines). */
function systemNode(): string | undefined {
  for (const directory of (process.env.PATH ?? "").split(delimiter)) {
    const candidate = join(directory, "node");
    if (directory.includes("node_modules") || !existsSync(candidate)) continue;
    return candidate;
  }
  return undefined;
}

test("node_modules/.bin/tackle runs from source on Node 24 and calls a tool", async () => {
  assert.ok(existsSync(linkedBin), "npm links the bin into node_modules/.bin");
  const version = await runTackle(["--version"], { command: [process.execPath, linkedBin] });
  assert.equal(version.stdout.trim(), "0.1.0", version.stderr);
  const call = await runTackle(["call", "demo.add", '{"numbers":[20,22]}'], {
    command: [process.execPath, linkedBin],
  });
  assert.equal(call.code, 0, call.stderr);
  assert.deepEqual(JSON.parse(call.stdout), { sum: 42 });
});

test("started by an older Node, the bin re-executes itself on the workspace's Node 24", async (context) => {
  const node = systemNode();
  if (node === undefined) {
    context.diagnostic(
      "no system node besides the workspace's Node 24: the in-process path is the one in use",
    );
    return;
  }
  const major = Number(
    execFileSync(node, ["-p", "process.versions.node.split('.')[0]"], { encoding: "utf8" }).trim(),
  );
  const call = await runTackle(["call", "demo.echo", '{"text":"re-exec"}'], { command: [node, linkedBin] });
  assert.equal(call.code, 0, `${node} (v${major}): ${call.stderr}`);
  assert.deepEqual(JSON.parse(call.stdout), { text: "re-exec" });
  const failing = await runTackle(["call", "demo.add", "{}"], { command: [node, linkedBin] });
  assert.equal(failing.code, 1, "the child's exit code comes through");
});

test("npx tackle works in the repository", async () => {
  const npx = await runTackle(["tackle", "tools", "--json"], {
    command: ["npx", "--no-install"],
    env: cleanEnv(),
    timeoutMs: 60_000,
  });
  assert.equal(npx.code, 0, npx.stderr);
  assert.equal((JSON.parse(npx.stdout) as { module: string }[])[0]?.module, "demo");
});
