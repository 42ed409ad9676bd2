/**
 * Extracts every TypeScript code block (```ts / ```typescript) of every README in the repository so
 * a test can type-check them under the project's strict settings.
 *
 * A block may need names it does not define (a model, a helper the prose mentions). Put them in an
 * HTML comment right before the block — invisible when the README is rendered, prepended to the block
 * when it is checked:
 *
 *     <!-- ts-preamble
 *     declare const model: import("ai").LanguageModel;
 *     -->
 *     ```ts
 *     ...
 *     ```
 */
import { readFileSync } from "node:fs";
import { basename, relative } from "node:path";
import { findMarkdown } from "./markdown-links.ts";

export interface Snippet {
  /** The README, relative to the repository root. */
  readonly readme: string;
  /** The line of the README where the block's code starts (1-based). */
  readonly line: number;
  readonly preamble: string;
  readonly code: string;
}

const fence = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)[^\n]*$/;

/** Every README.md under `root`, outside node_modules, dist and dot-folders. */
export function findReadmes(root: string): string[] {
  return findMarkdown(root).filter((file) => basename(file) === "README.md");
}

/** The TypeScript blocks of one Markdown text, each with the preamble written just before it. */
export function extractSnippets(readme: string, text: string): Snippet[] {
  const lines = text.split("\n");
  const snippets: Snippet[] = [];
  let preamble: string | undefined;
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index] ?? "";
    if (line.trim().startsWith("<!-- ts-preamble")) {
      const body: string[] = [];
      for (index++; index < lines.length && !(lines[index] ?? "").includes("-->"); index++)
        body.push(lines[index] ?? "");
      preamble = body.join("\n");
      continue;
    }
    const open = fence.exec(line);
    if (open === null) {
      if (line.trim() !== "") preamble = undefined; // a preamble belongs to the block right after it
      continue;
    }
    const [, indent = "", marker = "", language = ""] = open;
    const body: string[] = [];
    const start = index + 2;
    for (index++; index < lines.length; index++) {
      const current = lines[index] ?? "";
      if (current.trim().startsWith(marker) && current.trim().replace(/[`~]/g, "") === "") break;
      body.push(current.startsWith(indent) ? current.slice(indent.length) : current);
    }
    if (language === "ts" || language === "typescript") {
      snippets.push({ readme, line: start, preamble: preamble ?? "", code: body.join("\n") });
    }
    preamble = undefined;
  }
  return snippets;
}

/** Every snippet of every README under `root`. */
export function collectSnippets(root: string): Snippet[] {
  return findReadmes(root).flatMap((path) =>
    extractSnippets(relative(root, path), readFileSync(path, "utf8")),
  );
}
