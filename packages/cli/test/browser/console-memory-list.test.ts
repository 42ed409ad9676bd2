/**
 * The memory page's listing without a query, a page at a time: `memory.memory_list` read 20 memories at
 * a time, newest first, "More" reading the next page by its cursor until none follow. axe-core after
 * every step.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { Page } from "playwright-core";
import { type ConsoleUnderTest, openConsole, rawRequest } from "./console-under-test.ts";

let ui: ConsoleUnderTest;
let page: Page;
const step = (what: string) => ui.step(what);

before(async () => {
  ui = await openConsole();
  page = ui.page;
  await page.goto(ui.signInUrl());
  await page.getByRole("heading", { name: "Modules and tools", level: 1 }).waitFor({ timeout: 15_000 });
  await step("signing in");
});

after(async () => {
  await ui?.close();
});

test("memory: listed without a query 20 at a time, newest first; More reads on until none follow", async () => {
  // 23 memories in one scope, added through the page's own call path (as an MCP client calls).
  const cookie = (await ui.context.cookies()).map((item) => `${item.name}=${item.value}`).join("; ");
  for (let index = 1; index <= 23; index++) {
    const body = JSON.stringify({
      tool: "memory.memory_add",
      args: { userId: "pager", kind: "fact", content: `Pager note number ${index}` },
    });
    const added = await rawRequest(`${ui.origin}/api/call/stream`, body, { cookie, origin: ui.origin });
    assert.equal(added.status, 200, added.body);
    assert.match(added.body, /event: answer/);
    assert.doesNotMatch(added.body, /"ok":false/, added.body);
  }
  await page.goto(`${ui.origin}/#/memory`);
  await step("opening the memory page");
  await page.getByLabel("Scope: userId").fill("pager");
  await step('filling "Scope: userId"');
  await page.getByRole("button", { name: "Search" }).click();
  await page.locator('#memories[data-listing="paged"]').waitFor({ timeout: 20_000 });
  const items = page.locator("#memories li");
  await page.waitForFunction(() => document.querySelectorAll("#memories li").length === 20);
  await step("the first page listed");
  // Newest first: the last added heads the list.
  assert.match(await items.first().innerText(), /Pager note number 23\b/);
  const more = page.getByRole("button", { name: "More" });
  assert.match(
    await page.locator('[data-listing="more"]').innerText(),
    /20 shown, newest first; more follow/,
  );
  await more.click();
  await page.waitForFunction(() => document.querySelectorAll("#memories li").length === 23);
  await step('clicking "More"');
  const texts = await items.allInnerTexts();
  assert.match(texts[22] ?? "", /Pager note number 1\b/);
  assert.equal(new Set(texts.map((text) => /number (\d+)/.exec(text)?.[1])).size, 23, "each memory once");
  assert.equal(await more.count(), 0, "no More once none follow");
  await step("the last page listed");
  assert.deepEqual(ui.errors, []);
});
