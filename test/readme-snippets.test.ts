import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { testTimeoutMs } from "@tackle/test-support";
import { anchorsOf, brokenLinks, findMarkdown } from "./markdown-links.ts";
import { collectSnippets, extractSnippets, type Snippet } from "./readme-snippets.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const run = promisify(execFile);

describe("README code blocks", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-readme-snippets-"));
  after(() => rmSync(directory, { recursive: true, force: true }));

  it("every TypeScript block of every README type-checks under the project's strict settings", {
    timeout: testTimeoutMs(170_000),
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

describe("Markdown links", () => {
  it("every relative link of every *.md names a file that exists, and a heading that exists", () => {
    const files = findMarkdown(root);
    assert.ok(files.length >= 20, `found only ${files.length} Markdown files`);
    const broken = files.flatMap((path) => brokenLinks(root, path, readFileSync(path, "utf8")));
    assert.deepEqual(
      broken.map((link) => `${link.file}:${link.line}: ${link.target} (${link.reason})`),
      [],
    );
  });

  it("finds a missing file and a missing anchor, and ignores code, URLs and existing targets", () => {
    const directory = mkdtempSync(join(tmpdir(), "tackle-markdown-links-"));
    try {
      mkdirSync(join(directory, "docs"));
      writeFileSync(
        join(directory, "docs", "guide.md"),
        "# Guide\n\n## The console's web page\n\n## Setup\n\n## Setup\n",
      );
      const text = [
        "[ok](docs/guide.md#the-consoles-web-page) [ok](docs/guide.md#setup-1) [ok](docs) [ok](#local)",
        "[gone](docs/missing.md) and ![gone](docs/pic.png)",
        "[bad anchor](docs/guide.md#install) [bad local](#nowhere)",
        "`[in code](nowhere.md)` [web](https://example.com/x.md)",
        "```md",
        "[in a block](nowhere.md)",
        "```",
        "## Local",
      ].join("\n");
      const path = join(directory, "README.md");
      writeFileSync(path, text);
      assert.deepEqual(
        brokenLinks(directory, path, text).map((link) => `${link.line} ${link.target} ${link.reason}`),
        [
          "2 docs/missing.md no such file",
          "2 docs/pic.png no such file",
          "3 docs/guide.md#install no such anchor",
          "3 #nowhere no such anchor",
        ],
      );
      assert.deepEqual(
        [...anchorsOf("# A `code` title\n## Ünïcode & more!\n")],
        ["a-code-title", "ünïcode--more"],
      );
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});
