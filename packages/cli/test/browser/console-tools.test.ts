/**
 * The modules page as a person works in it, in a real Chromium against `tackle serve`: the tools found
 * by a search; arguments typed in the form or in the JSON editor beside it (kept in step, bad JSON
 * said and not sent); a call's progress and log lines as they come, its structuredContent beside the
 * tool's output schema, and its raw JSON-RPC exchange; the call history above the tools, a call run
 * again from it. axe-core is asked after every step.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { freePort, underLoadMs } from "@tackle/test-support";
import type { Locator, Page } from "playwright-core";
import { cleanEnv, type ServeProcess, startServe, tempHome } from "../tackle-process.ts";
import { assertAccessible, type Browser, launchChromium, watchErrors } from "./chromium.ts";

const steps = fileURLToPath(new URL("./fixtures/steps-bundle.ts", import.meta.url));
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
    cleanEnv({
      TACKLE_HOME: home.path,
      MESH_CONSOLE_LISTEN: `127.0.0.1:${port}`,
      MESH_TOOL_MODULES: `steps=${steps}`,
    }),
  );
  page = await (await browser.newContext()).newPage();
  errors = watchErrors(page);
  const url = /^sign in (\S+)$/m.exec(serve.banner)?.[1];
  assert.ok(url, `the banner prints a sign-in URL:\n${serve.banner}`);
  await page.goto(url);
  await assertAccessible(page, "opening");
  await page.locator('details[data-tool="steps.count"]').waitFor({ timeout: underLoadMs(20_000) });
  await assertAccessible(page, "signing in");
});

after(async () => {
  await browser?.close();
  await serve?.stop();
  home.remove();
});

/**
 * The pause before each of the counting tool's three steps: 1.5 s on a quiet machine, longer under
 * load (5 s at most, the tool's own bound), so the first report is still on screen alone after the
 * accessibility check that follows the click, however slow that check runs.
 */
const pauseMs = Math.min(5000, underLoadMs(1500));
const counting = `{"n":3,"pauseMs":${pauseMs}}`;

const panel = (tool: string): Locator => page.locator(`details[data-tool="${tool}"]`);
const editorOf = (tool: string): Locator => panel(tool).getByLabel("Arguments as JSON");

describe("the modules page, worked in: search and the JSON editor", () => {
  test("a search narrows the tool panels to those whose name or description matches", async () => {
    const all = await page.locator("details.tool").count();
    assert.ok(all > 20, `the built-in modules' tools are listed (${all})`);
    await page.getByLabel("Search the tools").fill("count slowly");
    await assertAccessible(page, 'filling "Search the tools"');
    await page.getByText(`1 of ${all} tools match.`).waitFor();
    assert.equal(await page.locator("details.tool:visible").count(), 1);
    assert.equal(await panel("steps.count").isVisible(), true);
    await assertAccessible(page, "searching the tools");
    await page.getByLabel("Search the tools").fill("memory_search_kb");
    await assertAccessible(page, 'filling "Search the tools"');
    await page.locator("details.tool:visible").first().waitFor();
    assert.deepEqual(
      await page
        .locator("details.tool:visible")
        .evaluateAll((panels) => panels.map((element) => element.getAttribute("data-tool"))),
      ["memory.memory_search_kb"],
    );
    await page.getByLabel("Search the tools").fill("");
    await assertAccessible(page, 'filling "Search the tools"');
    await page.getByText(`${all} tools.`).waitFor();
    await assertAccessible(page, "clearing the search");
  });

  test("the JSON editor beside the form follows it, leads it, and bad JSON is said and never sent", async () => {
    await panel("steps.count").locator("summary").click();
    await assertAccessible(page, "clicking summary");
    const editor = editorOf("steps.count");
    await editor.waitFor();
    await assertAccessible(page, "opening a tool's panel");
    // The form's defaults are in the editor at once; a typed value follows.
    assert.deepEqual(JSON.parse(await editor.inputValue()), { pauseMs: 600 });
    await panel("steps.count").getByLabel("n *").fill("2");
    await assertAccessible(page, 'filling "n *"');
    assert.deepEqual(JSON.parse(await editor.inputValue()), { n: 2, pauseMs: 600 });
    await assertAccessible(page, "typing in the form");
    // The editor leads: the form is drawn again with its values.
    await editor.fill('{ "n": 4, "pauseMs": 10 }');
    await assertAccessible(page, "filling the JSON editor");
    assert.equal(await panel("steps.count").getByLabel("n *").inputValue(), "4");
    assert.equal(await panel("steps.count").getByLabel("pauseMs").inputValue(), "10");
    await assertAccessible(page, "typing JSON in the editor");
    // Not JSON: said beside the editor, and Call sends nothing.
    await editor.fill('{ "n": 4, ');
    await assertAccessible(page, "filling the JSON editor");
    await panel("steps.count")
      .locator(".json-editor .field-error")
      .filter({ hasText: "Not valid JSON" })
      .waitFor();
    await panel("steps.count").getByRole("button", { name: "Call" }).click();
    await assertAccessible(page, 'clicking "Call"');
    await panel("steps.count").getByText("The arguments in the JSON editor are not valid JSON").waitFor();
    assert.equal(await page.locator("#history tbody tr").count(), 0, "nothing was called");
    await assertAccessible(page, "calling with bad JSON");
    assert.deepEqual(errors, []);
  });
});

describe("the modules page, worked in: calls, refusals and history", () => {
  test("a call's progress and log lines show while it runs; then its structuredContent, output schema and JSON-RPC exchange", async () => {
    const tool = panel("steps.count");
    await editorOf("steps.count").fill(counting);
    await assertAccessible(page, "filling the JSON editor");
    await tool.getByRole("button", { name: "Call" }).click();
    await assertAccessible(page, 'clicking "Call"');
    // The first report is on screen while the call still runs: no result yet.
    await tool
      .locator('[data-live="progress"]')
      .first()
      .waitFor({ timeout: underLoadMs(20_000) });
    assert.equal(await tool.locator("[data-result]").count(), 0, "progress shows before the result");
    assert.match(
      await tool.locator('[data-live="progress"]').first().innerText(),
      /progress 1\/3: step 1 of 3/,
    );
    await assertAccessible(page, "a call reporting progress");
    await tool.locator('[data-result="ok"]').waitFor({ timeout: underLoadMs(20_000) });
    assert.equal(await tool.locator('[data-live="progress"]').count(), 3);
    assert.deepEqual(await tool.locator('[data-live="log"]').allInnerTexts(), [
      "info steps.count counted 1",
      "info steps.count counted 2",
      "info steps.count counted 3",
    ]);
    assert.deepEqual(JSON.parse(await tool.locator('[data-result="ok"]').innerText()), {
      counted: 3,
      note: "counted to 3",
    });
    assert.deepEqual(JSON.parse(await tool.locator("[data-structured]").innerText()), {
      counted: 3,
      note: "counted to 3",
    });
    const schema = JSON.parse(await tool.locator("[data-output-schema]").innerText());
    assert.equal(schema.type, "object");
    assert.deepEqual(Object.keys(schema.properties).sort(), ["counted", "note"]);
    await assertAccessible(page, "the call's answer drawn");

    // The exchange as it crossed: the request with a progress token, the notifications, the result.
    await tool.locator(".rpc-exchange summary").click();
    await assertAccessible(page, "clicking .rpc-exchange summary");
    const messages = tool.locator(".rpc > li");
    const count = await messages.count();
    assert.ok(count >= 8, `request, 3 progress, 3 log lines and the response (${count})`);
    assert.match(
      await tool.locator(".rpc-exchange summary").innerText(),
      new RegExp(`\\(${count} messages\\)`),
    );
    const request = JSON.parse(await messages.first().locator("pre").innerText());
    assert.equal(request.method, "tools/call");
    assert.deepEqual(request.params.arguments, { n: 3, pauseMs });
    assert.notEqual(request.params._meta.progressToken, undefined);
    assert.equal(await messages.first().getAttribute("data-direction"), "sent");
    const response = JSON.parse(await messages.last().locator("pre").innerText());
    assert.equal(response.id, request.id);
    assert.deepEqual(response.result.structuredContent, { counted: 3, note: "counted to 3" });
    await assertAccessible(page, "opening the JSON-RPC exchange");
    assert.deepEqual(errors, []);
  });

  test("a refused call puts its issue beside the field; a tool without an output schema says so", async () => {
    const tool = panel("steps.count");
    await editorOf("steps.count").fill('{ "n": 0 }');
    await assertAccessible(page, "filling the JSON editor");
    await tool.getByRole("button", { name: "Call" }).click();
    await assertAccessible(page, 'clicking "Call"');
    await tool.locator('[data-result="error"]').waitFor({ timeout: underLoadMs(20_000) });
    assert.match(await tool.locator(".result").innerText(), /Error invalid_input in [\d.]+ ms round trip/);
    assert.match(await tool.locator("#steps-count-n-error").innerText(), /\S/);
    await assertAccessible(page, "a refused call");

    const echo = panel("demo.echo");
    await echo.locator("summary").click();
    await assertAccessible(page, "clicking summary");
    await editorOf("demo.echo").fill('{ "text": "hello" }');
    await assertAccessible(page, "filling the JSON editor");
    await echo.getByRole("button", { name: "Call" }).click();
    await assertAccessible(page, 'clicking "Call"');
    await echo.locator('[data-result="ok"]').waitFor({ timeout: underLoadMs(20_000) });
    await echo.locator('[data-output-schema="none"]').waitFor();
    assert.equal(await echo.locator("[data-live]").count(), 0);
    await echo.getByText("The tool reported no progress and wrote no log line.").waitFor();
    await assertAccessible(page, "a call without progress or output schema");
  });

  test("the call history sits above the tools, and a call runs again from it with its arguments", async () => {
    const historyTop = (await page.locator("#history-heading").boundingBox())?.y ?? Infinity;
    const toolsTop = (await page.locator("#tools-heading").boundingBox())?.y ?? 0;
    assert.ok(historyTop < toolsTop, `the history (${historyTop}) is above the tools (${toolsTop})`);
    const rows = page.locator("#history tbody tr");
    await rows.first().waitFor();
    const before = await rows.count();
    // The newest call is demo.echo; the steps.count call before it ran with n 3.
    const counted = rows.filter({ hasText: counting });
    await counted.getByRole("button", { name: "Run again: steps.count with these arguments" }).click();
    await assertAccessible(page, 'clicking "Run again: steps.count with these arguments"');
    const tool = panel("steps.count");
    await tool
      .locator('[data-live="progress"]')
      .first()
      .waitFor({ timeout: underLoadMs(20_000) });
    await assertAccessible(page, "running a call again from the history");
    await tool.locator('[data-result="ok"]').waitFor({ timeout: underLoadMs(20_000) });
    assert.deepEqual(JSON.parse(await editorOf("steps.count").inputValue()), { n: 3, pauseMs });
    await page.waitForFunction(
      (count) => document.querySelectorAll("#history tbody tr").length > count,
      before,
    );
    assert.match(
      await rows.first().innerText(),
      new RegExp(`steps\\.count\\s+\\{"n":3,"pauseMs":${pauseMs}\\}\\s+ok`),
    );
    await assertAccessible(page, "the re-run's answer drawn");
    assert.deepEqual(errors, []);
  });
});
