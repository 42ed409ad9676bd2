import assert from "node:assert/strict";
import { test } from "node:test";
import { entryModule, readAsset, shellHtml } from "./web-assets.ts";

test("the page's modules are served as JavaScript with their types stripped; nothing else of the package is", () => {
  assert.match(shellHtml(), new RegExp(`<script type="module" src="/assets/${entryModule}">`));
  const entry = readAsset(entryModule);
  assert.equal(entry?.type, "text/javascript; charset=utf-8");
  // The entry imports its siblings by their .ts names, each one served too.
  const imported = [...(entry?.body ?? "").matchAll(/from "\.\/([\w-]+\.ts)"/g)].map(
    (match) => match[1] ?? "",
  );
  assert.ok(imported.length >= 4, `the entry imports the pages (${imported.join(", ")})`);
  for (const name of imported) assert.equal(readAsset(name)?.type, "text/javascript; charset=utf-8", name);
  // Types are gone, positions kept: a typed declaration becomes spaces of the same length.
  const api = readAsset("api.ts")?.body ?? "";
  assert.doesNotMatch(api, /export interface|: Promise<Json>/);
  assert.match(api, /export async function api\(path +, options +=/);
  assert.equal(readAsset("console.css")?.type, "text/css; charset=utf-8");
  for (const name of [
    "tsconfig.json",
    "../web-assets.ts",
    "web-assets.ts",
    "console.js",
    "web-assets.test.ts",
  ])
    assert.equal(readAsset(name), undefined, name);
});
