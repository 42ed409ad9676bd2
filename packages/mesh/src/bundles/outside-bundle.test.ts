/** A JavaScript bundle anywhere on disk, with no node_modules of its own, imports the runtime's @tackle/core. */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { loadModules } from "./load-modules.ts";

/** The example bundle of the package README, exactly as a reader would copy it. */
function readmeExample(): string {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
  const block = /```js\n((?:\s*)\/\/ weather\.mjs\n[\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(block !== undefined, "the README shows weather.mjs");
  return block.replace(/^ {2}/gm, "");
}

test("a bundle in a temp folder imports @tackle/core and zod from the runtime (it could not)", async (context) => {
  const folder = mkdtempSync(join(tmpdir(), "tackle-outside-bundle-"));
  context.after(() => rmSync(folder, { recursive: true, force: true }));
  const path = join(folder, "weather.mjs");
  writeFileSync(path, readmeExample());
  const [loaded] = await loadModules([{ module: "weather", path }], { node: "n" });
  try {
    assert.deepEqual(loaded?.errors, []);
    assert.deepEqual(loaded?.toolset.names, ["forecast", "note"]);
    assert.deepEqual(await loaded?.toolset.invoke("forecast", { city: "Oslo" }), {
      city: "Oslo",
      sky: "clear",
    });
    const invalid = await loaded?.toolset.call("forecast", { city: 7 });
    assert.equal(invalid?.ok === false && invalid.error.code, "invalid_input");
  } finally {
    await loaded?.close();
  }
});

test("an import the runtime does not lend still fails, naming the package", async (context) => {
  const folder = mkdtempSync(join(tmpdir(), "tackle-outside-bundle-"));
  context.after(() => rmSync(folder, { recursive: true, force: true }));
  const path = join(folder, "needs-more.mjs");
  writeFileSync(path, `import "left-pad-that-does-not-exist";\nexport default [];\n`);
  const [loaded] = await loadModules([{ module: "more", path }], { node: "n" });
  assert.match(loaded?.errors[0]?.message ?? "", /left-pad-that-does-not-exist/);
  await loaded?.close();
});
