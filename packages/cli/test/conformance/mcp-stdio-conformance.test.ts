/**
 * The public MCP conformance suite against `tackle mcp` (a real child process speaking stdio),
 * through a test-only HTTP bridge, since the suite drives servers over Streamable HTTP only. A fresh
 * `tackle mcp` per scenario: each scenario's client initializes its own session.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { tempHome } from "../tackle-process.ts";
import { resultTable, runScenario, type ScenarioResult, stdioScenarios } from "./run-suite.ts";
import { startStdioBridge } from "./stdio-bridge.ts";

const bundle = fileURLToPath(new URL("./conformance-bundle.mjs", import.meta.url));
const home = tempHome();
const results: ScenarioResult[] = [];

after(() => {
  home.remove();
  if (results.length > 0) process.stdout.write(`# tackle mcp conformance\n${resultTable(results)}\n`);
});

for (const scenario of stdioScenarios) {
  test(`tackle mcp: ${scenario}`, async () => {
    const bridge = await startStdioBridge({
      TACKLE_HOME: home.path,
      MESH_TOOL_MODULES: `test=${bundle}`,
      TACKLE_LOG_LEVEL: "silent",
    });
    try {
      const result = await runScenario(bridge.url, scenario);
      results.push(result);
      assert.deepEqual(result.failures, [], `${scenario} failed`);
      assert.ok(result.success > 0, `${scenario} passed no check`);
    } finally {
      await bridge.close();
    }
  });
}
