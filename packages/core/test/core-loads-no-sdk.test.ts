/**
 * Importing `@tackle/core` alone loads no framework SDK; each adapter subpath loads only its own. No
 * import loads the tokenizer's tables: they load on the first count.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { it } from "node:test";
import { fileURLToPath } from "node:url";

const lister = fileURLToPath(new URL("./fixtures/list-loaded-modules.ts", import.meta.url));
const sdks = {
  ai: /\/node_modules\/(ai|@ai-sdk\/[^/]+)\//,
  openai: /\/node_modules\/openai\//,
  langchain: /\/node_modules\/@langchain\//,
  mcp: /\/node_modules\/@modelcontextprotocol\//,
  tokenizer: /\/node_modules\/gpt-tokenizer\//,
};

function sdksLoadedBy(specifier: string): string[] {
  const output = execFileSync(process.execPath, ["--conditions=@tackle/source", lister, specifier], {
    encoding: "utf8",
  });
  const urls = JSON.parse(output) as string[];
  return Object.entries(sdks)
    .filter(([, pattern]) => urls.some((url) => pattern.test(url)))
    .map(([name]) => name);
}

it("@tackle/core loads none of the SDKs", () => {
  assert.deepEqual(sdksLoadedBy("@tackle/core"), []);
});

it("each adapter subpath loads its own SDK and no other", () => {
  assert.deepEqual(sdksLoadedBy("@tackle/core/ai-sdk"), ["ai"]);
  assert.deepEqual(sdksLoadedBy("@tackle/core/openai"), []); // types only: the helpers need no runtime SDK
  assert.deepEqual(sdksLoadedBy("@tackle/core/langchain"), ["langchain"]);
  assert.deepEqual(sdksLoadedBy("@tackle/core/mcp"), ["mcp"]);
  assert.deepEqual(sdksLoadedBy("@tackle/core/tokens"), []);
});
