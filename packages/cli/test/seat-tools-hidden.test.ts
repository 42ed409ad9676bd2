/**
 * The `mcp` seat's verbs (`mcp.prompts`, `mcp.complete`, …) serve MCP's prompts and resources, not a
 * person: `tackle tools` (table and JSON) and the console page's module listing leave them out, while
 * the modules' own tools stay listed.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { freePort } from "@tackle/test-support";
import { readConsoleToken } from "../src/console/console-token.ts";
import { cleanEnv, runTackle, type ServeProcess, startServe, tempHome } from "./tackle-process.ts";

const home = tempHome();
const env = cleanEnv({ TACKLE_HOME: home.path, TACKLE_LOG_LEVEL: "silent" });
let serve: ServeProcess | undefined;

before(async () => {
  serve = await startServe(["--builtin", "--listen", `127.0.0.1:${await freePort()}`], env);
});

after(async () => {
  await serve?.stop();
  home.remove();
});

interface Listed {
  readonly module: string;
  readonly tools: readonly { readonly name: string }[];
}

function seatTools(modules: readonly Listed[]): string[] {
  return modules.flatMap((info) =>
    info.tools.filter((tool) => tool.name.startsWith("mcp.")).map((tool) => `${info.module}.${tool.name}`),
  );
}

test("tackle tools lists docscript's and memory's tools without their mcp seat verbs", async () => {
  const table = await runTackle(["tools", "--builtin", "--allow-unhealthy"], { env, timeoutMs: 60_000 });
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^docscript\s+ok\s+-\s+.*\bedit\b/m);
  assert.doesNotMatch(table.stdout, /mcp\./);
  const json = await runTackle(["tools", "--builtin", "--json", "--allow-unhealthy"], {
    env,
    timeoutMs: 60_000,
  });
  const modules = JSON.parse(json.stdout) as Listed[];
  assert.ok(modules.find((info) => info.module === "memory")?.tools.length);
  assert.deepEqual(seatTools(modules), []);
});

test("the console page's module listing offers no seat verb as a tool", async () => {
  const response = await fetch(new URL("/api/modules", serve?.url), {
    headers: { authorization: `Bearer ${readConsoleToken(serve?.tokenFile ?? "")}` },
    signal: AbortSignal.timeout(30_000),
  });
  assert.equal(response.status, 200);
  const { modules } = (await response.json()) as { modules: Listed[] };
  assert.ok(modules.find((info) => info.module === "docscript")?.tools.some((tool) => tool.name === "edit"));
  assert.deepEqual(seatTools(modules), []);
});
