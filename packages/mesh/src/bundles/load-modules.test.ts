import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { loadModules } from "./load-modules.ts";

const fixtures = fileURLToPath(new URL("../../test/fixtures/", import.meta.url));
const directory = mkdtempSync(join(tmpdir(), "tackle-mesh-bundles-"));
after(() => rmSync(directory, { recursive: true, force: true }));

function bundle(name: string, text: string): string {
  const path = join(directory, name);
  writeFileSync(path, text);
  return path;
}

describe("loadModules with JavaScript bundles", () => {
  it("imports array, ToolSet and function exports, merging several entries of one module", async () => {
    const [alpha, beta] = await loadModules(
      [
        { module: "alpha", path: join(fixtures, "alpha.ts") },
        { module: "beta", path: join(fixtures, "beta.mjs") },
        { module: "alpha", path: join(fixtures, "toolset-bundle.mjs") },
      ],
      { node: "node-x", env: { MESH_OPERATOR_ACCOUNT: "ada" } },
    );
    try {
      assert.deepEqual(alpha?.toolset.names, [
        "echo",
        "add",
        "fail",
        "slow",
        "cancellable",
        "cancelled",
        "ping",
      ]);
      assert.deepEqual(alpha?.errors, []);
      assert.equal(await alpha?.toolset.invoke("ping", {}), "pong");
      assert.deepEqual(await beta?.toolset.invoke("context", {}), {
        module: "beta",
        node: "node-x",
        env: { MESH_OPERATOR_ACCOUNT: "ada", MESH_MODULE: "beta", MESH_NODE: "node-x" },
      });
    } finally {
      await alpha?.close();
      await beta?.close();
    }
  });

  it("names a bundle that throws at import, and the module's other bundles serve", async () => {
    const [module] = await loadModules([
      { module: "alpha", path: join(fixtures, "throws-at-import.js") },
      { module: "alpha", path: join(fixtures, "alpha.ts") },
    ]);
    assert.deepEqual(module?.errors, [
      { source: join(fixtures, "throws-at-import.js"), message: "broken bundle: cannot reach its database" },
    ]);
    assert.deepEqual(await module?.toolset.invoke("echo", { text: "ok" }), { text: "ok" });
  });

  it("gives up on a bundle whose import never finishes, and serves the others", async () => {
    const [module] = await loadModules(
      [
        { module: "alpha", path: join(fixtures, "hangs-at-import.mjs") },
        { module: "alpha", path: join(fixtures, "alpha.ts") },
      ],
      { importTimeoutMs: 300 },
    );
    assert.match(module?.errors[0]?.message ?? "", /did not finish loading within 300 ms/);
    assert.deepEqual(await module?.toolset.invoke("add", { a: 1, b: 1 }), 2);
  });

  it("refuses a duplicate tool naming both sources, a tool named tools, and a name that is no subject", async () => {
    const [module] = await loadModules([
      { module: "alpha", path: join(fixtures, "alpha.ts") },
      { module: "alpha", path: join(fixtures, "clashing.mjs") },
    ]);
    assert.deepEqual(module?.toolset.names, [
      "echo",
      "add",
      "fail",
      "slow",
      "cancellable",
      "cancelled",
      "extra",
    ]);
    assert.equal(module?.errors.length, 3);
    assert.match(
      module?.errors[0]?.message ?? "",
      new RegExp(
        `Duplicate tool name "echo": defined at ${join(fixtures, "alpha.ts")}:\\d+ and at ${join(fixtures, "clashing.mjs")}:\\d+`,
      ),
    );
    assert.match(module?.errors[1]?.message ?? "", /Tool name "tools" is reserved/);
    assert.match(module?.errors[2]?.message ?? "", /Tool name "bad\.\.name" .* cannot be a NATS subject/);
    assert.equal(
      await module?.toolset
        .invoke("echo", { text: "first wins" })
        .then((output) => (output as { text: string }).text),
      "first wins",
    );
  });

  it("names what is wrong with a bundle that does not keep the contract", async () => {
    const noDefault = bundle("no-default.mjs", "export const tools = [];");
    const wrongShape = bundle("wrong.mjs", "export default { hello: 1 };");
    const notExecutable = bundle("data.bin", "binary");
    const executableJs = bundle("exec.js", "#!/bin/sh\nexit 3\n");
    chmodSync(executableJs, 0o755);
    const noInterpreter = bundle("no-interpreter", "#!/nonexistent/interpreter\n");
    chmodSync(noInterpreter, 0o755);
    const [module] = await loadModules([
      { module: "odd", path: noDefault },
      { module: "odd", path: wrongShape },
      { module: "odd", path: notExecutable },
      { module: "odd", path: join(directory, "missing.js") },
      { module: "odd", path: executableJs },
      { module: "odd", path: noInterpreter },
    ]);
    assert.equal(module?.toolset.names.length, 0);
    const messages = module?.errors.map((error) => error.message) ?? [];
    assert.match(messages[0] ?? "", /has no default export/);
    assert.match(messages[1] ?? "", /not an array of tools, a ToolSet, or a function/);
    assert.match(messages[2] ?? "", /neither a JavaScript module nor executable/);
    assert.match(messages[3] ?? "", /ENOENT/);
    assert.match(
      messages[4] ?? "",
      /exited before the MCP handshake \(exit code 3\)/,
      "an executable .js is launched, not imported",
    );
    assert.match(
      messages[5] ?? "",
      /exited before the MCP handshake \(exit status unknown\): spawn .*no-interpreter ENOENT/,
    );
  });
});
