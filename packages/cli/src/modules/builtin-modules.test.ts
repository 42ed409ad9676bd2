import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { builtinModules, builtinModulesSetting } from "./builtin-modules.ts";

const packages = fileURLToPath(new URL("../../../", import.meta.url));

test("demo is always built in; memory and docscript exactly when their bundles exist", () => {
  const modules = builtinModules();
  assert.equal(modules[0]?.module, "demo");
  for (const entry of modules) assert.ok(existsSync(entry.path), entry.path);
  for (const name of ["memory", "docscript"]) {
    const bundle = `${packages}${name}/src/module/bundle.ts`;
    assert.equal(
      modules.some((entry) => entry.module === name && entry.path === bundle),
      existsSync(bundle),
      name,
    );
  }
  assert.match(builtinModulesSetting(), /^demo=\/.+\/demo\.ts(,|$)/);
});
