/**
 * The page's files: one HTML shell, one stylesheet and the page's TypeScript modules, read from this
 * package (never a CDN). A module is served as JavaScript with its types stripped (Node's own
 * `stripTypeScriptTypes`, once per file): no bundler and no build step (ADR 0114).
 */
import { readdirSync, readFileSync } from "node:fs";
import { stripTypeScriptTypes } from "node:module";
import { fileURLToPath } from "node:url";

// Source runs from src/, a build from dist/: the page stays in src/ (shipped with the package) either way.
const built = import.meta.url.endsWith(".js");
const pageDir = new URL(built ? "../../../src/console/web/page/" : "./page/", import.meta.url);

/** The entry module the shell loads; it imports the others by their `.ts` names. */
export const entryModule = "console.ts";

/** What the browser is sent: every page module and the stylesheet, by file name; nothing else. */
const shipped: ReadonlySet<string> = new Set(
  readdirSync(fileURLToPath(pageDir)).filter(
    (name) => name === "console.css" || (name.endsWith(".ts") && !name.endsWith(".test.ts")),
  ),
);

const cache = new Map<string, { body: string; type: string }>();

/** An asset by its file name, or undefined for anything not shipped. */
export function readAsset(name: string): { body: string; type: string } | undefined {
  if (!shipped.has(name)) return undefined;
  let asset = cache.get(name);
  if (asset === undefined) {
    const text = readFileSync(fileURLToPath(new URL(name, pageDir)), "utf8");
    asset = name.endsWith(".ts")
      ? { body: stripTypes(text), type: "text/javascript; charset=utf-8" }
      : { body: text, type: "text/css; charset=utf-8" };
    cache.set(name, asset);
  }
  return asset;
}

/**
 * The module as JavaScript: types replaced by spaces, so lines and columns stay those of the source a
 * developer reads in the browser's tools. Node flags the function experimental once per process; that
 * one warning is not the console's to print.
 */
function stripTypes(source: string): string {
  const emit = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const text = typeof warning === "string" ? warning : warning.message;
    if (/stripTypeScriptTypes/.test(text)) return;
    (emit as (...args: unknown[]) => void).call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    return stripTypeScriptTypes(source, { mode: "strip" });
  } finally {
    process.emitWarning = emit;
  }
}

/**
 * Every module named up front, so the browser fetches them at once rather than one import level after
 * another (the entry, then the pages, then what they import).
 */
const preloads = [...shipped]
  .filter((name) => name.endsWith(".ts") && name !== entryModule)
  .sort()
  .map((name) => `<link rel="modulepreload" href="/assets/${name}">`)
  .join("\n");

export function shellHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tackle console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/console.css">
${preloads}
<script type="module" src="/assets/${entryModule}"></script>
</head>
<body>
<header class="top">
  <span class="brand">Tackle console</span>
  <nav aria-label="Pages" id="nav" hidden>
    <a href="#/modules" data-page="modules">Modules and tools</a>
    <a href="#/runs" data-page="runs">Durable runs</a>
    <a href="#/memory" data-page="memory">Memory</a>
    <a href="#/documents" data-page="documents">Documents</a>
  </nav>
  <button type="button" id="sign-out" class="link" hidden>Sign out</button>
</header>
<main id="main" tabindex="-1"><p class="muted">Loading…</p></main>
</body>
</html>
`;
}
