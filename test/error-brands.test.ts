/**
 * Every ToolError subclass a package exports declares a brand of its own, so its `isInstance` answers
 * for that class only (ADR 0020). A subclass without one would answer for its parent.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import { fileURLToPath } from "node:url";
import { ToolError } from "@tackle/core";

const root = fileURLToPath(new URL("..", import.meta.url));

/** Every `@tackle/<package>[/<subpath>]` entry point the workspace's packages export. */
function entryPoints(): string[] {
  const entries: string[] = [];
  for (const name of readdirSync(join(root, "packages"))) {
    const manifest = JSON.parse(readFileSync(join(root, "packages", name, "package.json"), "utf8")) as {
      name: string;
      exports?: Record<string, unknown>;
    };
    for (const subpath of Object.keys(manifest.exports ?? { ".": true })) {
      if (!subpath.includes("*"))
        entries.push(subpath === "." ? manifest.name : `${manifest.name}${subpath.slice(1)}`);
    }
  }
  return entries.sort();
}

it("every exported ToolError subclass has a brand of its own", async () => {
  const checked: string[] = [];
  const missing: string[] = [];
  for (const entry of entryPoints()) {
    const loaded = (await import(entry)) as Record<string, unknown>;
    for (const [exported, value] of Object.entries(loaded)) {
      if (typeof value !== "function" || !(value.prototype instanceof ToolError)) continue;
      checked.push(`${entry} ${exported}`);
      if (!Object.hasOwn(value, "brand")) missing.push(`${entry} ${exported}`);
    }
  }
  assert.ok(checked.length >= 10, `found only ${checked.length} ToolError subclasses: ${checked.join(", ")}`);
  assert.deepEqual(missing, [], `no brand of their own:\n${missing.join("\n")}`);
});
