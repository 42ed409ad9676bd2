/**
 * The public MCP conformance suite (`@modelcontextprotocol/conformance`, offline from node_modules)
 * against the console with its token, serving the conformance fixture bundle as module `test`: every
 * server scenario, each without a failure or a warning.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { freePort } from "@tackle/test-support";
import { readConsoleToken } from "../../src/console/console-token.ts";
import { cleanEnv, type ServeProcess, startServe, tempHome } from "../tackle-process.ts";
import { resultTable, runScenario, type ScenarioResult, serverScenarios } from "./run-suite.ts";
import { type SuiteProxy, startSuiteProxy } from "./suite-proxy.ts";

const bundle = fileURLToPath(new URL("./conformance-bundle.mjs", import.meta.url));
const home = tempHome();
let serve: ServeProcess;
let proxy: SuiteProxy;
const results: ScenarioResult[] = [];

before(async () => {
  serve = await startServe(
    [],
    cleanEnv({
      TACKLE_HOME: home.path,
      MESH_TOOL_MODULES: `test=${bundle}`,
      MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}`,
    }),
  );
  proxy = await startSuiteProxy(serve.url, readConsoleToken(serve.tokenFile ?? ""));
});

after(async () => {
  await proxy?.close();
  await serve?.stop();
  home.remove();
  if (results.length > 0) process.stdout.write(`# console conformance\n${resultTable(results)}\n`);
});

for (const scenario of serverScenarios) {
  test(`console: ${scenario}`, async () => {
    const result = await runScenario(proxy.url, scenario);
    results.push(result);
    assert.deepEqual(result.failures, [], `${scenario} failed`);
    assert.deepEqual(result.warnings, [], `${scenario} warned`);
    assert.ok(result.success > 0, `${scenario} passed no check`);
  });
}
