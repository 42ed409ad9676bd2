/**
 * The public MCP conformance suite against tools served by another node: a runtime on a real
 * nats-server serves the fixture bundle as module `test`, and the console of a second node and
 * `tackle mcp` (mesh source) answer for it, so every call, progress report and log line crosses NATS.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import { readConsoleToken } from "../../src/console/console-token.ts";
import { cleanEnv, type ServeProcess, startFrontConsole, startServe, tempHome } from "../tackle-process.ts";
import { meshScenarios, resultTable, runScenario, type ScenarioResult } from "./run-suite.ts";
import { startStdioBridge } from "./stdio-bridge.ts";
import { type SuiteProxy, startSuiteProxy } from "./suite-proxy.ts";

const bundle = fileURLToPath(new URL("./conformance-bundle.mjs", import.meta.url));
const home = tempHome();
let nats: NatsServerHandle;
let toolsNode: ServeProcess;
let consoleNode: ServeProcess;
let proxy: SuiteProxy;
const consoleResults: ScenarioResult[] = [];
const stdioResults: ScenarioResult[] = [];

/** The scenarios about tools and their messages; the transport ones are the console's own, run elsewhere. */
const scenarios = meshScenarios;

before(async () => {
  nats = await startNatsServer();
  const mesh = { MESH_BROKER_URL: nats.url, TACKLE_HOME: home.path };
  toolsNode = await startServe(
    ["--no-console"],
    cleanEnv({ ...mesh, MESH_NODE: "tools", MESH_TOOL_MODULES: `test=${bundle}` }),
    /module test: ok/,
  );
  consoleNode = await startFrontConsole(mesh);
  proxy = await startSuiteProxy(consoleNode.url, readConsoleToken(consoleNode.tokenFile ?? ""));
});

after(async () => {
  await proxy?.close();
  await consoleNode?.stop();
  await toolsNode?.stop();
  await nats?.close();
  home.remove();
  if (consoleResults.length > 0)
    process.stdout.write(`# console conformance, tools on another node\n${resultTable(consoleResults)}\n`);
  if (stdioResults.length > 0)
    process.stdout.write(`# tackle mcp conformance, tools on another node\n${resultTable(stdioResults)}\n`);
});

describe("console, tools on another node", () => {
  for (const scenario of scenarios) {
    test(`console over the mesh: ${scenario}`, async () => {
      const result = await runScenario(proxy.url, scenario);
      consoleResults.push(result);
      assert.deepEqual(result.failures, [], `${scenario} failed`);
      assert.ok(result.success > 0, `${scenario} passed no check`);
    });
  }
});

describe("tackle mcp, tools on another node", () => {
  for (const scenario of scenarios) {
    test(`tackle mcp over the mesh: ${scenario}`, async () => {
      const bridge = await startStdioBridge({
        TACKLE_HOME: home.path,
        MESH_BROKER_URL: nats.url,
        MESH_NODE: "stdio",
        TACKLE_LOG_LEVEL: "silent",
      });
      try {
        const result = await runScenario(bridge.url, scenario);
        stdioResults.push(result);
        assert.deepEqual(result.failures, [], `${scenario} failed`);
        assert.ok(result.success > 0, `${scenario} passed no check`);
      } finally {
        await bridge.close();
      }
    });
  }
});
