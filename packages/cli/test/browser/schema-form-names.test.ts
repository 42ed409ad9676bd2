/**
 * The page's argument form (`schema-form.ts`, as `tackle serve` ships it, in a real Chromium) with
 * properties named like Object.prototype's (ADR 0274): a `__proto__` field's value is sent as the
 * tool's argument, and a `constructor` or `toString` the values to fill in lack opens empty, not
 * filled with Object's own function; and an address naming `#/constructor` shows the modules page,
 * as any name that is no page does.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { freePort, underLoadMs } from "@tackle/test-support";
import type { Page } from "playwright-core";
import { cleanEnv, type ServeProcess, startServe, tempHome } from "../tackle-process.ts";
import { type Browser, launchChromium, watchErrors } from "./chromium.ts";

const home = tempHome();
let serve: ServeProcess;
let browser: Browser;
let page: Page;
let errors: string[];

before(async () => {
  const port = await freePort();
  browser = await launchChromium();
  serve = await startServe(
    ["--builtin"],
    cleanEnv({ TACKLE_HOME: home.path, MESH_CONSOLE_LISTEN: `127.0.0.1:${port}` }),
  );
  page = await (await browser.newContext()).newPage();
  errors = watchErrors(page);
  const url = /^sign in (\S+)$/m.exec(serve.banner)?.[1];
  assert.ok(url, `the banner prints a sign-in URL:\n${serve.banner}`);
  await page.goto(url);
});

after(async () => {
  await browser?.close();
  await serve?.stop();
  home.remove();
});

// JSON text: in an object literal `__proto__:` would set the prototype, not name a property.
const schemaJson = JSON.stringify({
  type: "object",
  properties: JSON.parse(
    '{"__proto__":{"type":"string"},"constructor":{"type":"string"},"toString":{"type":"string"},"valueOf":{"type":"number"},"note":{"type":"string"}}',
  ),
});

/** What the form reads back (as the JSON sent), built in the page with `values` filled in. */
async function formReads(valuesJson: string): Promise<unknown> {
  const text = await page.evaluate(
    async ({ moduleUrl, schemaJson, valuesJson }) => {
      // The module as the console serves it to its own page.
      const { buildForm } = (await import(moduleUrl)) as {
        buildForm(schema: unknown, id: string, values?: unknown): { element: Element; read(): unknown };
      };
      const form = buildForm(JSON.parse(schemaJson), "names", JSON.parse(valuesJson));
      document.body.append(form.element);
      const read = JSON.stringify(form.read());
      form.element.remove();
      return read;
    },
    { moduleUrl: "/assets/schema-form.ts", schemaJson, valuesJson },
  );
  return JSON.parse(text);
}

test("a field named __proto__ is sent as the tool's argument, like every other field", async () => {
  const read = await formReads('{"__proto__":"p","constructor":"c","toString":"t","valueOf":2,"note":"n"}');
  assert.equal(
    JSON.stringify(read),
    '{"__proto__":"p","constructor":"c","toString":"t","valueOf":2,"note":"n"}',
  );
});

test("fields the values lack open empty, even when Object.prototype has their names", async () => {
  assert.deepEqual(await formReads('{"note":"n"}'), { note: "n" });
});

test("an address naming an inherited property shows the modules page, as an unknown name does", async () => {
  const origin = new URL(page.url()).origin;
  for (const name of ["constructor", "toString", "hasOwnProperty", "__proto__", "nosuchpage"]) {
    await page.goto(`${origin}/#/${name}`);
    await page.locator('details[data-tool="demo.echo"]').waitFor({ timeout: underLoadMs(20_000) });
    assert.match(await page.title(), /^Modules · Tackle console$/, name);
  }
  assert.deepEqual(errors, []);
});
