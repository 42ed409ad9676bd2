/** Runs the all-adapters example as a user would, in its own process, and checks what it printed. */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { underLoadMs } from "@tackle/test-support";

const example = fileURLToPath(new URL("./all-adapters.ts", import.meta.url));

it("calls the same tools through the AI SDK, OpenAI, MCP at both revisions and LangChain", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, ["--conditions=@tackle/source", example], {
    timeout: underLoadMs(60_000),
  });
  const lines = stdout.split("\n");
  const section = (heading: string) => {
    const start = lines.findIndex((line) => line.startsWith(heading));
    assert.ok(start >= 0, `missing section ${heading}`);
    const end = lines.findIndex((line, index) => index > start && line.startsWith("=="));
    return lines.slice(start, end === -1 ? undefined : end).join("\n");
  };

  assert.match(stdout, /^Tools, defined once: weather\.current, units\.celsius_to_fahrenheit/);
  const aiSdk = section("== AI SDK");
  assert.match(aiSdk, /weather__current\(\{"city":"Izmir"\}\) -> \{"city":"Izmir","celsius":24\}/);
  assert.match(aiSdk, /\{"city":"Atlantis"\}\) -> error unknown_city: No station in Atlantis/);
  assert.match(aiSdk, /model's answer: It is 24 °C in Izmir/);

  const openAI = section("== OpenAI");
  assert.match(openAI, /\{"celsius":24\}\) -> \{"fahrenheit":75\}/);
  assert.match(openAI, /\{"celsius":"warm"\}\) -> error invalid_input: .*celsius: /);
  assert.match(openAI, /second turn, after reading the tool messages: Tool results: \{"fahrenheit":75\}/);

  for (const revision of ["2025-11-25", "2026-07-28"]) {
    const mcp = section(`== MCP: SDK v2 client and server, protocol ${revision}`);
    assert.match(mcp, /tools\/list -> weather\.current, units\.celsius_to_fahrenheit/);
    assert.match(mcp, /\{"city":"Oslo"\}\) -> \{"city":"Oslo","celsius":3\}/);
    assert.match(mcp, /isError true, error unknown_city/);
    assert.match(mcp, /remote\.units\.celsius_to_fahrenheit\(\{"celsius":3\}\) -> ok \{"fahrenheit":37\}/);
  }

  const langChain = section("== LangChain");
  assert.match(langChain, /\{"city":"Lima"\}\) -> ToolMessage success, \{"city":"Lima","celsius":18\}/);
  assert.match(langChain, /\{"town":"Lima"\}\) -> ToolMessage error, error invalid_input: .*city: /);
});
