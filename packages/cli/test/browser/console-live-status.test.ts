/**
 * Live module status in the page, on a real mesh: two `tackle serve` processes on a private
 * nats-server; a module that fails to load is shown failed with its error; node B stops and the open
 * page shows its module unreachable (with the error), then ok again when B is back — without a reload.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { freePort, type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import type { Page } from "playwright-core";
import { cleanEnv, runTackle, type ServeProcess, startServe, tempHome } from "../tackle-process.ts";
import { assertAccessible, type Browser, launchChromium, watchErrors } from "./chromium.ts";

const whoami = fileURLToPath(new URL("../fixtures/whoami-bundle.ts", import.meta.url));
const broken = fileURLToPath(new URL("../fixtures/broken-bundle.js", import.meta.url));
const home = tempHome();
let nats: NatsServerHandle;
let nodeA: ServeProcess;
let nodeB: ServeProcess | undefined;
let browser: Browser;
let mesh: Record<string, string>;

function startNodeB(): Promise<ServeProcess> {
  return startServe(
    ["--no-console"],
    cleanEnv({ ...mesh, MESH_NODE: "b", MESH_TOOL_MODULES: `beta=${whoami}` }),
    /module beta: ok/,
  );
}

before(async () => {
  browser = await launchChromium();
  nats = await startNatsServer();
  mesh = { MESH_BROKER_URL: nats.url, TACKLE_HOME: home.path };
  const issued = await runTackle(["mesh", "issue", "b", "beta"], { env: cleanEnv(mesh) });
  assert.equal(issued.code, 0, issued.stderr);
  nodeB = await startNodeB();
  nodeA = await startServe(
    [],
    cleanEnv({
      ...mesh,
      MESH_NODE: "a",
      // And one module that throws as it loads: shown failed, with its error.
      MESH_TOOL_MODULES: `alpha=${whoami},broken=${broken}`,
      MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}`,
    }),
  );
});

after(async () => {
  await browser?.close();
  await nodeA?.stop();
  await nodeB?.stop();
  await nats?.close();
  home.remove();
});

async function betaRow(page: Page): Promise<string> {
  return page.locator('#modules tr[data-module="beta"]').innerText();
}

test("a failed module shows its error; a module's status changes in the open page without a reload: unreachable with its error, then ok", async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = watchErrors(page);
  const signIn = /^sign in (\S+)$/m.exec(nodeA.banner)?.[1];
  assert.ok(signIn, nodeA.banner);
  await page.goto(signIn);
  await page.locator('#modules tr[data-module="beta"]').waitFor({ timeout: 15_000 });
  assert.match(await betaRow(page), /beta\s+ok\s+b\s+1/);
  assert.match(await page.locator('#modules tr[data-module="alpha"]').innerText(), /alpha\s+ok\s+a\s+1/);
  const failed = page.locator('#modules tr[data-module="broken"]');
  assert.match(await failed.innerText(), /^broken\s+failed\s+a\s+0\s/);
  assert.match(await failed.locator("td.errors").innerText(), /broken-bundle\.js: .*broken on purpose/);
  assert.equal(await page.locator('details[data-tool^="broken."]').count(), 0);
  await assertAccessible(page, "signing in, with a failed module listed");
  // A mark on this document: a reload would lose it.
  await page.evaluate(() => {
    (globalThis as { notReloaded?: boolean }).notReloaded = true;
  });

  assert.equal(await nodeB?.stop(), 0);
  nodeB = undefined;
  await page.waitForFunction(
    () =>
      /\tunreachable\t/.test(
        document.querySelector<HTMLElement>('#modules tr[data-module="beta"]')?.innerText ?? "",
      ),
    undefined,
    { timeout: 30_000 },
  );
  assert.match(await betaRow(page), /beta\s+unreachable\b[\s\S]*beta/);
  assert.equal(await page.locator('details[data-tool="beta.whoami"]').count(), 0, "its tool left the list");
  await assertAccessible(page, "a module turning unreachable");

  nodeB = await startNodeB();
  await page.waitForFunction(
    () =>
      /\tok\t/.test(document.querySelector<HTMLElement>('#modules tr[data-module="beta"]')?.innerText ?? ""),
    undefined,
    { timeout: 30_000 },
  );
  await page.locator('details[data-tool="beta.whoami"]').waitFor();
  assert.equal(await page.evaluate(() => (globalThis as { notReloaded?: boolean }).notReloaded), true);
  await assertAccessible(page, "the module back ok");
  assert.deepEqual(errors, []);
});
