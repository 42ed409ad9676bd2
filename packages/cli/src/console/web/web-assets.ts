/** The page's files: one HTML shell, one script, one stylesheet, read from this package (never a CDN). */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

// Source runs from src/, a build from dist/: the assets stay in src/ (shipped with the package) either way.
const built = import.meta.url.endsWith(".js");
const assetsDir = new URL(built ? "../../../src/console/web/assets/" : "./assets/", import.meta.url);

const types: Record<string, string> = {
  "console.js": "text/javascript; charset=utf-8",
  "console.css": "text/css; charset=utf-8",
};

const cache = new Map<string, string>();

/** An asset by its file name, or undefined for anything not shipped. */
export function readAsset(name: string): { body: string; type: string } | undefined {
  const type = types[name];
  if (type === undefined) return undefined;
  let body = cache.get(name);
  if (body === undefined) {
    body = readFileSync(fileURLToPath(new URL(name, assetsDir)), "utf8");
    cache.set(name, body);
  }
  return { body, type };
}

export function shellHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tackle console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/console.css">
<script type="module" src="/assets/console.js"></script>
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
