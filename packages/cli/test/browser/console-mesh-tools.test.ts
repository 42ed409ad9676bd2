/**
 * A tool served by another node, called from the console page: its output schema travels in the mesh
 * catalogue and shows beside the result's structuredContent, its progress and log lines come over the
 * mesh into the live pane; a tool that declares no output schema says so. Two `tackle serve` processes
 * on a private nats-server; axe-core after every step.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { freePort, type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import type { Page } from "playwright-core";
import { cleanEnv, runTackle, type ServeProcess, startServe, tempHome } from "../tackle-process.ts";
import { assertAccessible, type Browser, launchChromium, watchErrors } from "./chromium.ts";

const steps = fileURLToPath(new URL("./fixtures/steps-bundle.ts", import.meta.url));
const whoami = fileURLToPath(new URL("../fixtures/whoami-bundle.ts", import.meta.url));
const home = tempHome();
let nats: NatsServerHandle;
let nodeA: ServeProcess;
let nodeB: ServeProcess;
let browser: Browser;
let page: Page;
let errors: string[];

before(async () => {
  browser = await launchChromium();
  nats = await startNatsServer();
  const mesh = { MESH_BROKER_URL: nats.url, TACKLE_HOME: home.path };
  const issued = await runTackle(["mesh", "issue", "b", "steps"], { env: cleanEnv(mesh) });
  assert.equal(issued.code, 0, issued.stderr);
  nodeB = await startServe(
    ["--no-console"],
    cleanEnv({ ...mesh, MESH_NODE: "b", MESH_TOOL_MODULES: `steps=${steps}` }),
    /module steps: ok/,
  );
  nodeA = await startServe(
    [],
    cleanEnv({
      ...mesh,
      MESH_NODE: "a",
      MESH_TOOL_MODULES: `alpha=${whoami}`,
      MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}`,
    }),
  );
  page = await (await browser.newContext()).newPage();
  errors = watchErrors(page);
  const signIn = /^sign in (\S+)$/m.exec(nodeA.banner)?.[1];
  assert.ok(signIn, nodeA.banner);
  await page.goto(signIn);
  await page.locator('details[data-tool="steps.count"]').waitFor({ timeout: 20_000 });
  await assertAccessible(page, "signing in");
});

after(async () => {
  await browser?.close();
  await nodeA?.stop();
  await nodeB?.stop();
  await nats?.close();
  home.remove();
});

test("a tool on another node shows its output schema, its progress and log over the mesh; one without says so", async () => {
  const tool = page.locator('details[data-tool="steps.count"]');
  await tool.locator("summary").click();
  await assertAccessible(page, "opening steps.count");
  await tool.getByLabel("Arguments as JSON").fill('{ "n": 2, "pauseMs": 100 }');
  await assertAccessible(page, "filling the JSON editor");
  await tool.getByRole("button", { name: "Call" }).click();
  await tool.locator("[data-result], .result p.error").first().waitFor({ timeout: 60_000 });
  assert.equal(
    await tool.locator('[data-result="ok"]').count(),
    1,
    await tool.locator(".result").innerText(),
  );
  await assertAccessible(page, 'clicking "Call"');
  assert.deepEqual(JSON.parse(await tool.locator("[data-structured]").innerText()), {
    counted: 2,
    note: "counted to 2",
  });
  const schema = JSON.parse(await tool.locator("[data-output-schema]").innerText());
  assert.equal(schema.type, "object");
  assert.deepEqual(Object.keys(schema.properties).sort(), ["counted", "note"]);
  assert.equal(await tool.locator('[data-live="progress"]').count(), 2, "progress came over the mesh");
  assert.equal(await tool.locator('[data-live="log"]').count(), 2, "log lines came over the mesh");

  const bare = page.locator('details[data-tool="alpha.whoami"]');
  await bare.locator("summary").click();
  await assertAccessible(page, "opening alpha.whoami");
  await bare.getByRole("button", { name: "Call" }).click();
  await bare.locator("[data-result]").waitFor({ timeout: 30_000 });
  await assertAccessible(page, 'clicking "Call" on alpha.whoami');
  await bare.locator('[data-output-schema="none"]').waitFor();
  assert.match(await bare.locator('[data-output-schema="none"]').innerText(), /declares no output schema/);
  assert.deepEqual(errors, []);
});
