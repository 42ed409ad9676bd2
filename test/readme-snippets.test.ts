import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { collectSnippets, extractSnippets, type Snippet } from "./readme-snippets.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const run = promisify(execFile);

describe("README code blocks", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-readme-snippets-"));
  after(() => rmSync(directory, { recursive: true, force: true }));

  it("every TypeScript block of every README type-checks under the project's strict settings", {
    timeout: 170_000,
  }, async () => {
    const snippets = collectSnippets(root);
    assert.ok(
      snippets.length >= 10,
      `found only ${snippets.length} blocks: is the extractor still reading the READMEs?`,
    );
    // Imports resolve from the workspace: the checked files see its node_modules (and the packages
    // linked there) through a link, and nothing is written inside the repository.
    symlinkSync(join(root, "node_modules"), join(directory, "node_modules"), "dir");
    const files = new Map<string, { snippet: Snippet; offset: number }>();
    snippets.forEach((snippet, index) => {
      const name = `${String(index).padStart(2, "0")}-${snippet.readme.replaceAll(/[^A-Za-z0-9]+/g, "-")}.ts`;
      const preamble = snippet.preamble === "" ? "" : `${snippet.preamble}\n`;
      // `export {}` makes each block a module of its own (top-level await, no name clashes).
      writeFileSync(join(directory, name), `${preamble}${snippet.code}\nexport {};\n`);
      files.set(name, { snippet, offset: preamble.split("\n").length - 1 });
    });
    writeFileSync(join(directory, "package.json"), JSON.stringify({ type: "module" }));
    writeFileSync(
      join(directory, "tsconfig.json"),
      JSON.stringify({
        extends: join(root, "tsconfig.base.json"),
        compilerOptions: { noEmit: true, rootDir: "." },
        include: ["*.ts"],
      }),
    );
    const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
    const result = await run(
      process.execPath,
      [tsc, "-p", join(directory, "tsconfig.json"), "--pretty", "false"],
      {
        cwd: directory,
      },
    ).then(
      () => ({ failed: false, output: "" }),
      (error: { stdout?: string; stderr?: string }) => ({
        failed: true,
        output: `${error.stdout ?? ""}${error.stderr ?? ""}`,
      }),
    );
    // Errors point at the README line, not at the scratch file.
    const readable = result.output.replaceAll(
      /^(\d\d-[^(]+\.ts)\((\d+),(\d+)\)/gm,
      (whole, name: string, line: string, column: string) => {
        const file = files.get(name);
        if (file === undefined) return whole;
        const readmeLine = Number(line) - file.offset;
        return readmeLine < 1
          ? `${file.snippet.readme} (preamble of the block at line ${file.snippet.line}, line ${line}):${column}`
          : `${file.snippet.readme}:${file.snippet.line + readmeLine - 1}:${column}`;
      },
    );
    assert.equal(result.failed, false, `\n${readable}`);
  });

  it("reads ts and typescript blocks with the preamble just before them, and nothing else", () => {
    const text = [
      "# Title",
      "<!-- ts-preamble",
      "declare const model: string;",
      "-->",
      "```ts",
      "console.log(model);",
      "```",
      "```sh",
      "npm test",
      "```",
      "<!-- ts-preamble",
      "declare const lost: number;",
      "-->",
      "prose between the preamble and the block",
      "```typescript",
      "const a: number = 1;",
      "```",
      "- a list item",
      "  ```ts",
      "  const indented = true;",
      "  ```",
    ].join("\n");
    assert.deepEqual(extractSnippets("R.md", text), [
      { readme: "R.md", line: 6, preamble: "declare const model: string;", code: "console.log(model);" },
      { readme: "R.md", line: 16, preamble: "", code: "const a: number = 1;" },
      { readme: "R.md", line: 20, preamble: "", code: "const indented = true;" },
    ]);
  });
});
