import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { checkArchitecture, formatViolations } from "./architecture.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

describe("architecture", () => {
  it("every import in packages/*/src and packages/*/test* keeps the dependency rules", () => {
    const violations = checkArchitecture(root);
    assert.equal(violations.length, 0, `\n${formatViolations(violations)}`);
  });

  describe("the checker catches each kind of forbidden import", () => {
    const workspace = mkdtempSync(join(tmpdir(), "tackle-architecture-"));
    after(() => rmSync(workspace, { recursive: true, force: true }));
    const write = (path: string, text: string) => {
      mkdirSync(dirname(join(workspace, path)), { recursive: true });
      writeFileSync(join(workspace, path), text);
    };
    const manifest = (name: string, extra: object = {}) =>
      JSON.stringify({
        name: `@tackle/${name}`,
        exports: { ".": "./src/index.ts", "./server": "./src/server.ts" },
        ...extra,
      });
    for (const name of ["core", "storage", "mesh", "durable", "memory", "docscript", "cli"]) {
      write(`packages/${name}/package.json`, manifest(name));
      write(`packages/${name}/src/index.ts`, "export {};\n");
    }
    write("packages/core/src/a.ts", 'import { x } from "@tackle/mesh";\n');
    write("packages/storage/src/a.ts", 'export * from "@tackle/core";\n');
    write("packages/mesh/src/a.ts", 'import type { M } from "@tackle/memory/server";\n');
    write("packages/mesh/src/b.ts", 'const durable = await import("@tackle/durable");\n');
    write("packages/mesh/src/c.ts", 'import "@tackle/storage";\n');
    write("packages/memory/src/a.ts", 'import { d } from "@tackle/docscript";\n');
    write("packages/durable/src/a.ts", 'import { run } from "@tackle/cli";\n');
    write("packages/docscript/src/a.ts", 'import { y } from "../../core/src/index.ts";\n');
    write("packages/docscript/src/b.ts", 'import { z } from "@tackle/core/src/tool/define-tool.ts";\n');
    write(
      "packages/cli/src/modules/a.ts",
      "const bundle = new URL(`../../../memory/src/module/bundle.ts`, import.meta.url);\n",
    );
    write("packages/cli/src/b.ts", 'import { h } from "@tackle/test-support";\n');
    write(
      "packages/cli/test/ok.test.ts",
      'import { h } from "@tackle/test-support";\nimport { s } from "@tackle/memory/server";\n',
    );
    write(
      "packages/durable/src/ok.ts",
      'import { c } from "@tackle/core";\nimport { s } from "@tackle/storage";\nimport { t } from "./a.ts";\n',
    );
    write("packages/memory/package.json", manifest("memory", { dependencies: { "@tackle/mesh": "*" } }));

    const found = checkArchitecture(workspace);
    const at = (file: string) => found.filter((violation) => violation.file === file).map((v) => v.rule);

    it("core imports no package of ours", () => {
      assert.match(at("packages/core/src/a.ts").join(), /core may not import mesh/);
    });
    it("storage imports no package of ours", () => {
      assert.match(at("packages/storage/src/a.ts").join(), /storage may not import core/);
    });
    it("mesh imports no module package and not storage, whether by import type, import() or side effect", () => {
      assert.match(at("packages/mesh/src/a.ts").join(), /mesh may not import memory/);
      assert.match(at("packages/mesh/src/b.ts").join(), /mesh may not import durable/);
      assert.match(at("packages/mesh/src/c.ts").join(), /mesh may not import storage/);
    });
    it("module packages meet only through core and storage", () => {
      assert.match(at("packages/memory/src/a.ts").join(), /memory may not import docscript/);
    });
    it("nothing imports the cli", () => {
      assert.match(at("packages/durable/src/a.ts").join(), /nothing imports the cli/);
    });
    it("another package only by name and an exported subpath", () => {
      assert.match(at("packages/docscript/src/a.ts").join(), /relative path out of packages\/docscript/);
      assert.match(
        at("packages/docscript/src/b.ts").join(),
        /does not export "\.\/src\/tool\/define-tool\.ts"/,
      );
      assert.match(at("packages/cli/src/modules/a.ts").join(), /a path into packages\/memory/);
    });
    it("test-support only from tests", () => {
      assert.match(at("packages/cli/src/b.ts").join(), /for tests only/);
      assert.deepEqual(at("packages/cli/test/ok.test.ts"), []);
    });
    it("a manifest declares only allowed workspace dependencies", () => {
      assert.match(at("packages/memory/package.json").join(), /memory may not depend on mesh/);
    });
    it("allowed imports pass", () => {
      assert.deepEqual(at("packages/durable/src/ok.ts"), []);
    });
  });
});
