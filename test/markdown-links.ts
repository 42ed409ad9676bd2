/**
 * The relative links of the repository's Markdown: every `[text](path#anchor)` outside code must name
 * a file or folder that exists and, for a Markdown file, a heading it has (GitHub's anchor for it).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";

export interface BrokenLink {
  /** The Markdown file, relative to the repository root, and the line of the link. */
  readonly file: string;
  readonly line: number;
  readonly target: string;
  readonly reason: "no such file" | "no such anchor";
}

/** Every *.md under `root`, outside node_modules, dist and dot-folders. */
export function findMarkdown(root: string): string[] {
  const found: string[] = [];
  const walk = (directory: string) => {
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (entry.name === "node_modules" || entry.name === "dist" || entry.name.startsWith(".")) continue;
        walk(join(directory, entry.name));
      } else if (entry.name.endsWith(".md")) {
        found.push(join(directory, entry.name));
      }
    }
  };
  walk(root);
  return found.sort();
}

/**
 * The text with fenced blocks blanked (line numbers kept), and inline code too unless kept: links there
 * are examples, and a `# comment` in a shell block is no heading.
 */
function proseOnly(text: string, keepInlineCode = false): string {
  let marker: string | undefined;
  return text
    .split("\n")
    .map((line) => {
      const fence = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
      if (marker === undefined && fence !== undefined) {
        marker = fence;
        return "";
      }
      if (marker !== undefined) {
        if (line.trim().startsWith(marker) && line.trim().replace(/[`~]/g, "") === "") marker = undefined;
        return "";
      }
      return keepInlineCode ? line : line.replaceAll(/(`+)[^`]*?\1/g, "");
    })
    .join("\n");
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
export function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replaceAll(/<[^>]*>/g, "")
    .replaceAll(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replaceAll(/[^\p{L}\p{N}\p{M} _-]/gu, "")
    .replaceAll(" ", "-");
}

/** The anchors a Markdown text offers: its headings (repeats get -1, -2, …) and explicit ids. */
export function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const match of proseOnly(text, true).matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const anchor = headingAnchor((match[1] ?? "").replaceAll("`", ""));
    const count = seen.get(anchor) ?? 0;
    seen.set(anchor, count + 1);
    anchors.add(count === 0 ? anchor : `${anchor}-${count}`);
  }
  for (const match of text.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(match[1] ?? "");
  return anchors;
}

/** The broken relative links of one Markdown file (`path` absolute, `root` for the names reported). */
export function brokenLinks(root: string, path: string, text: string): BrokenLink[] {
  const broken: BrokenLink[] = [];
  const lines = proseOnly(text).split("\n");
  lines.forEach((line, index) => {
    for (const match of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = match[1] ?? "";
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, …
      const [file = "", anchor] = target.split("#");
      const resolved = file === "" ? path : join(dirname(path), decodeURIComponent(file));
      const report = (reason: BrokenLink["reason"]) =>
        broken.push({ file: relative(root, path), line: index + 1, target, reason });
      if (!existsSync(resolved)) {
        report("no such file");
        continue;
      }
      if (anchor === undefined || anchor === "" || !resolved.endsWith(".md") || !statSync(resolved).isFile())
        continue;
      const anchors = anchorsOf(resolved === path ? text : readFileSync(resolved, "utf8"));
      if (!anchors.has(decodeURIComponent(anchor))) report("no such anchor");
    }
  });
  return broken;
}
