/**
 * The console's web page in a real Chromium, against `npm start` run as the README says: the printed
 * sign-in URL, every page, a tool called from its form, a memory found and deleted, an edit script
 * committed and another client's commit in the document's change log, the demo durable agent approved
 * from its card, and the guards (one-time code, Origin). axe-core is asked after every step
 * (console-runs.test.ts has the durable runs page).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { createDocScriptTool } from "@tackle/docscript";
import { freePort } from "@tackle/test-support";
import type { BrowserContext, Page } from "playwright-core";
import { assertAccessible, type Browser, watchErrors } from "./chromium.ts";
import { type ConsoleUnderTest, openConsole, rawRequest } from "./console-under-test.ts";
import { timelineCaptions, timelineLayout } from "./timeline-layout.ts";

const shipping = fileURLToPath(new URL("../fixtures/shipping-bundle.ts", import.meta.url));
let ui: ConsoleUnderTest;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let errors: string[];
let origin: string;
let serve: ConsoleUnderTest["serve"];
/** The docscript module's embedded document server, which the test also reaches as another client. */
let documentServer: string;
const documentToken = "sample-document-token-for-the-test";
const step = (what: string) => ui.step(what);
const checkPage = (name: string) => ui.checkPage(name);
const signInUrl = () => ui.signInUrl();

before(async () => {
  const documentPort = await freePort();
  documentServer = `http://127.0.0.1:${documentPort}`;
  ui = await openConsole({
    viaNpmStart: true,
    // The built-in modules (npm start serves them with --builtin) plus one with a nested input schema.
    env: {
      MESH_TOOL_MODULES: `shipping=${shipping}`,
      DOCSCRIPT_PORT: String(documentPort),
      DOCSCRIPT_TOKEN: documentToken,
    },
  });
  ({ serve, browser, context, page, errors, origin } = ui);
});

after(async () => {
  await ui?.close();
});

describe("the console page, served by npm start: sign-in and guards", () => {
  test("npm start, then the printed sign-in URL opened in Chromium, shows the modules page", async () => {
    assert.match(serve.banner, /^console http:\/\/127\.0\.0\.1:\d+\/mcp$/m);
    const url = signInUrl();
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/#login=[\w-]{20,}$/);
    await page.goto(url);
    await step("opening the page");
    await page.getByRole("heading", { name: "Modules and tools", level: 1 }).waitFor({ timeout: 15_000 });
    // The code left the address bar; the modules table shows every built-in module as ok.
    assert.equal(new URL(page.url()).hash, "#/modules");
    const demo = page.locator('#modules tr[data-module="demo"]');
    await demo.waitFor();
    assert.match(await demo.innerText(), /demo\s+ok\s+this process\s+4/);
    for (const module of ["memory", "docscript"]) {
      assert.match(await page.locator(`#modules tr[data-module="${module}"]`).innerText(), /\bok\b/);
    }
    // The session is an HttpOnly, SameSite=Strict cookie: the page's script cannot read it.
    const cookies = await context.cookies();
    assert.equal(cookies.length, 1);
    assert.equal(cookies[0]?.httpOnly, true);
    assert.equal(cookies[0]?.sameSite, "Strict");
    assert.equal(await page.evaluate(() => document.cookie), "");
    await checkPage("modules");
  });

  test("the sign-in URL works once: a second browser opening it is asked for the token", async () => {
    const other = await browser.newContext();
    const second = await other.newPage();
    const secondErrors = watchErrors(second);
    await second.goto(signInUrl());
    await assertAccessible(second, "opening the page");
    await second.getByRole("heading", { name: "Sign in" }).waitFor({ timeout: 15_000 });
    assert.match(await second.locator("main").innerText(), /already used or is not valid/);
    // The API answers it nothing but 401.
    const status = await second.evaluate(async () => (await fetch("/api/modules")).status);
    assert.equal(status, 401);
    // The console token (from its 0600 file) signs in instead.
    const token = readFileSync(serve.tokenFile ?? "", "utf8").trim();
    await second.getByLabel("Console token").fill(token);
    await assertAccessible(second, 'filling "Console token"');
    await second.getByRole("button", { name: "Sign in" }).click();
    await assertAccessible(second, 'clicking "Sign in"');
    await second.getByRole("heading", { name: "Modules and tools", level: 1 }).waitFor();
    // The refused sign-in answered 401, which the browser logs; nothing else went wrong.
    assert.deepEqual(
      secondErrors.filter((error) => !/401/.test(error)),
      [],
    );
  });

  test("a state-changing request with a foreign Origin is refused, even with the session cookie", async () => {
    const cookie = (await context.cookies()).map((item) => `${item.name}=${item.value}`).join("; ");
    const call = JSON.stringify({ tool: "demo.echo", args: { text: "x" } });
    const same = await post("/api/call/stream", call, { cookie, origin });
    assert.equal(same.status, 200, same.body);
    for (const foreign of ["http://evil.example", `http://127.0.0.1:${Number(new URL(origin).port) + 1}`]) {
      const refused = await post("/api/call/stream", call, { cookie, origin: foreign });
      assert.equal(refused.status, 403, `${foreign}: ${refused.body}`);
    }
    const noOrigin = await post("/api/call/stream", call, { cookie });
    assert.equal(noOrigin.status, 403);
    const rebound = await post("/api/call/stream", call, { cookie, origin, host: "evil.example" });
    assert.equal(rebound.status, 403);
    const noCookie = await post("/api/call/stream", call, { origin });
    assert.equal(noCookie.status, 401);
    // Every other state-changing route too: starting a run, resuming or cancelling one, signing in or out.
    const routes: [string, string, string][] = [
      ["POST", "/api/runs", "{}"],
      ["POST", "/api/durable/ag-ui/demo-refund", "{}"],
      ["POST", "/api/durable/runs/demo-x/cancel", "{}"],
      ["POST", "/api/session", JSON.stringify({ token: "x" })],
      ["DELETE", "/api/session", ""],
    ];
    const otherPort = `http://127.0.0.1:${Number(new URL(origin).port) + 1}`;
    for (const [method, path, body] of routes) {
      for (const [foreign, why] of [
        ["http://evil.example", /is not a loopback origin/],
        [otherPort, /is not this console/],
      ] as const) {
        const refused = await post(path, body, { cookie, origin: foreign }, method);
        assert.equal(refused.status, 403, `${method} ${path} from ${foreign}: ${refused.body}`);
        assert.match(refused.body, why);
      }
    }
    // The session survived all of that: the page's own origin still gets through.
    assert.equal((await post("/api/call/stream", call, { cookie, origin })).status, 200);
  });
});

describe("the console page, served by npm start: tools from their forms", () => {
  test("a tool is called from its generated form: result as data, time taken, issues beside the field, history", async () => {
    await page.goto(`${origin}/#/modules`);
    await step("opening the modules page");
    const panel = page.locator('details[data-tool="demo.add"]');
    // A closed panel has no form yet: it is built from the schema when the panel is first opened.
    assert.equal(await panel.locator("form").count(), 0);
    await panel.locator("summary").click();
    await step("clicking summary");
    // Empty array first: the tool's own issue appears beside the numbers field.
    await panel.getByRole("button", { name: "Call" }).click();
    await step('clicking "Call"');
    await panel.locator('[data-result="error"]').waitFor();
    assert.match(
      await panel.locator(".result").innerText(),
      /Error invalid_input in [\d.]+ ms round trip \(the tool took [\d.]+ ms\)/,
    );
    assert.match(await panel.locator("#demo-add-numbers-error").innerText(), /\S/);

    await panel.getByRole("button", { name: "Add numbers" }).click();
    await step('clicking "Add numbers"');
    await panel.getByRole("button", { name: "Add numbers" }).click();
    await step('clicking "Add numbers"');
    await panel.getByLabel("numbers 1", { exact: true }).fill("40");
    await step('filling "numbers 1"');
    await panel.getByLabel("numbers 2", { exact: true }).fill("2.5");
    await step('filling "numbers 2"');
    await panel.getByRole("button", { name: "Call" }).click();
    await step('clicking "Call"');
    await panel.locator('[data-result="ok"]').waitFor();
    assert.deepEqual(JSON.parse(await panel.locator('[data-result="ok"]').innerText()), { sum: 42.5 });
    // The time shown first is the round trip the page waited for, never less than the tool's own.
    const timing = /Result in ([\d.]+) ms round trip \(the tool took ([\d.]+) ms\)/.exec(
      await panel.locator(".result").innerText(),
    );
    assert.ok(timing !== null, "the result says the round trip and the tool's time");
    assert.ok(Number(timing[1]) >= Number(timing[2]), `round trip ${timing[1]} ms ≥ tool ${timing[2]} ms`);
    assert.equal(await panel.locator("#demo-add-numbers-error").innerText(), "");

    // An enum with a default, from a real tool's schema: memory_search's kinds are a select per item.
    const history = page.locator("#history tbody tr");
    assert.equal(await history.count(), 2);
    assert.match(await history.first().innerText(), /demo\.add\s+\{"numbers":\[40,2\.5\]\}\s+ok/);
    await page.reload();
    await page.locator("#history tbody tr").first().waitFor();
    assert.equal(await page.locator("#history tbody tr").count(), 2, "the history lasts the browser session");
    assert.deepEqual(errors, []);
  });

  test("a nested schema becomes nested fieldsets: enums as selects with their defaults, an array of objects, a checkbox", async () => {
    await page.goto(`${origin}/#/modules`);
    await step("opening the modules page");
    const panel = page.locator('details[data-tool="shipping.quote"]');
    await panel.locator("summary").click();
    await step("clicking summary");
    const destination = panel.getByRole("group", { name: "destination *" });
    assert.equal(
      await destination.getByLabel("country").inputValue(),
      '"DE"',
      "the enum's default is selected",
    );
    assert.equal(await panel.getByLabel("speed").inputValue(), '"standard"');
    assert.equal(await panel.getByLabel("insured").isChecked(), false);
    await destination.getByLabel("city *").fill("Lyon");
    await step('filling "city *"');
    await destination.getByLabel("country").selectOption({ label: "FR" });
    await step('choosing "country"');
    await panel.getByRole("button", { name: "Add items" }).click();
    await step('clicking "Add items"');
    const item = panel.getByRole("group", { name: "items 1" });
    assert.equal(await item.getByLabel("quantity").inputValue(), "1", "a number's default is filled in");
    // The sku is left empty: the tool's own issue lands beside it, inside the array's object.
    await item.getByLabel("quantity").fill("3");
    await step('filling "quantity"');
    await panel.getByRole("button", { name: "Call" }).click();
    await step('clicking "Call"');
    await panel.locator('[data-result="error"]').waitFor();
    assert.match(await panel.locator("#shipping-quote-items-0-sku-error").innerText(), /\S/);
    await item.getByLabel("sku *").fill("MUG-1");
    await step('filling "sku *"');
    await panel.getByLabel("speed").selectOption({ label: "express" });
    await step('choosing "speed"');
    await panel.getByLabel("insured").check();
    await step('checking "insured"');
    await panel.getByRole("button", { name: "Call" }).click();
    await step('clicking "Call"');
    await panel.locator('[data-result="ok"]').waitFor();
    assert.deepEqual(JSON.parse(await panel.locator('[data-result="ok"]').innerText()), {
      to: "Lyon, FR",
      parcels: 3,
      price: 14,
    });
    assert.deepEqual(errors, []);
  });
});

describe("the console page, served by npm start: memory", () => {
  test("memory: a memory added in a scope is found there, its versions and provenance shown, then deleted after confirmation", async () => {
    await page.goto(`${origin}/#/memory`);
    await step("opening the memory page");
    await page.getByLabel("Scope: userId").fill("ada");
    await step('filling "Scope: userId"');
    await page.getByLabel("Remember this").fill("Ada prefers green tea in the morning");
    await step('filling "Remember this"');
    await page.getByRole("button", { name: "Add a memory in this scope" }).click();
    await step('clicking "Add a memory in this scope"');
    await page.locator("#versions tbody tr").first().waitFor();
    await page.getByLabel("Search for").fill("green tea");
    await step('filling "Search for"');
    await page.getByRole("button", { name: "Search" }).click();
    await step('clicking "Search"');
    const hit = page.locator("#memories li").filter({ hasText: "Ada prefers green tea" });
    await hit.waitFor();
    // Another scope does not see it.
    await page.getByLabel("Scope: userId").fill("bob");
    await step('filling "Scope: userId"');
    await page.getByRole("button", { name: "Search" }).click();
    await step('clicking "Search"');
    await page.getByText("Nothing found in this scope.").waitFor();
    await page.getByLabel("Scope: userId").fill("ada");
    await step('filling "Scope: userId"');
    await page.getByRole("button", { name: "Search" }).click();
    await step('clicking "Search"');
    await hit.locator("button").click();
    await step("clicking button");
    await page.locator("#memory-detail dd").filter({ hasText: '"source": "api"' }).waitFor();
    await checkPage("memory");
    await page.getByRole("button", { name: "Delete…" }).click();
    await step('clicking "Delete…"');
    const dialog = page.getByRole("dialog", { name: "Delete this memory?" });
    await dialog.waitFor();
    await dialog.getByRole("button", { name: "Delete" }).click();
    await step('clicking "Delete"');
    await page.locator("#memory-detail").getByText("Deleted.").waitFor();
    const versions = await page.locator("#versions tbody tr").allInnerTexts();
    assert.equal(versions.length, 2);
    assert.match(versions.join("\n"), /\bdelete\b/);
    await page.getByText("Nothing found in this scope.").waitFor();
    assert.deepEqual(errors, []);
  });

  test("memory: the kind picker narrows a search; a memory added shows in the list at once", async () => {
    await page.goto(`${origin}/#/memory`);
    await step("opening the memory page");
    // The page may still hold the last test's search (the same address is no new navigation).
    await page.getByLabel("Search for").fill("");
    await page.getByLabel("Scope: userId").fill("cy");
    await step('filling "Scope: userId"');
    const add = async (text: string, kind: string) => {
      await page.getByLabel("Remember this").fill(text);
      await page.getByLabel("Its kind").selectOption(kind);
      await step(`choosing the kind ${kind}`);
      await page.getByRole("button", { name: "Add a memory in this scope" }).click();
      await page.locator("#memory-detail dd").filter({ hasText: text }).waitFor({ timeout: 20_000 });
      await step(`adding "${text}"`);
    };
    await add("Cy flies to Lisbon on Fridays", "episode");
    await add("Cy wants an aisle seat on the Lisbon plane", "preference");
    const shown = () => page.locator("#memories li").allInnerTexts();
    // No query: the scope's newest memories, newest first.
    await page.getByRole("button", { name: "Search" }).click();
    // Listed by memory_list a page at a time where the module serves it, else its five newest.
    await page.locator("#memories[data-listing]").waitFor({ timeout: 20_000 });
    await page.waitForFunction(() => document.querySelectorAll("#memories li").length === 2);
    assert.match((await shown())[0] ?? "", /aisle seat/);
    await step("listing the scope without a query");
    // Waits for the list the search answers: its count alone can be the last search's (one item each).
    const search = async (kind: string, count: number, holding: RegExp) => {
      await page.getByLabel("Kind", { exact: true }).selectOption(kind);
      await page.getByRole("button", { name: "Search" }).click();
      await page.waitForFunction(
        ([n, pattern]) => {
          const items = Array.from(document.querySelectorAll<HTMLElement>("#memories li"));
          return (
            items.length === n && new RegExp(pattern).test(items.map((item) => item.innerText).join("\n"))
          );
        },
        [count, holding.source] as const,
      );
      await step(`searching the kind ${kind || "every kind"}`);
    };
    await page.getByLabel("Search for").fill("Lisbon");
    await search("preference", 1, /aisle seat/);
    assert.match((await shown()).join("\n"), /aisle seat[\s\S]*preference/);
    await search("episode", 1, /flies to Lisbon/);
    assert.match((await shown()).join("\n"), /flies to Lisbon[\s\S]*episode/);
    await search("", 2, /aisle seat[\s\S]*flies to Lisbon|flies to Lisbon[\s\S]*aisle seat/);
    // Added while the search is shown: the list is read again and holds it, without searching again.
    await add("Cy keeps a Lisbon guidebook in the car", "fact");
    await page.waitForFunction(() => document.querySelectorAll("#memories li").length === 3);
    assert.match((await shown()).join("\n"), /Lisbon guidebook/);
    await step("the list read again after adding");
    assert.deepEqual(errors, []);
  });
});

describe("the console page, served by npm start: documents", () => {
  test("documents: the sample timeline is drawn; an edit script is previewed, committed, and the drawing changes", async () => {
    await page.goto(`${origin}/#/documents`);
    await step("opening the documents page");
    const svg = page.locator("#timeline svg");
    await svg.waitFor();
    assert.equal(await svg.getAttribute("data-clips"), "3");
    assert.equal(await page.locator("#timeline .lane-label").count(), 3);
    assert.match(await timelineCaptions(page), /Hello/);
    const versionBefore = await page.locator("#timeline").getAttribute("data-version");
    // The sample document was created whole; nothing was pushed to it yet.
    await page.getByText("No changes stored for this document yet.").waitFor();

    await page.getByRole("button", { name: "Preview" }).click();
    await step('clicking "Preview"');
    await page.locator('[data-preview="counts"]').waitFor();
    assert.match(await page.locator('[data-preview="counts"]').innerText(), /3 created/);
    // Nothing published by the preview.
    assert.equal(await svg.getAttribute("data-clips"), "3");
    await page.getByRole("button", { name: "Commit" }).click();
    await step('clicking "Commit"');
    await page.waitForFunction(
      () => document.querySelector("#timeline svg")?.getAttribute("data-clips") === "4",
    );
    assert.match(await timelineCaptions(page), /Welcome!/);
    // Legible as drawn: the two captions (0.5 s and 3 s, close on the axis) do not overlap, and no
    // block's label runs past its block.
    const layout = await timelineLayout(page);
    assert.deepEqual(layout, { captions: 2, overlapping: false, spilling: 0 });
    assert.notEqual(await page.locator("#timeline").getAttribute("data-version"), versionBefore);
    // The commit is the document's first logged change, read back from the document server with its plan id.
    const planId = await page.locator("[data-committed]").getAttribute("data-committed");
    assert.match(planId ?? "", /^plan_/);
    const own = page.locator('#change-log li[data-seq="1"]');
    await own.waitFor();
    assert.equal(await own.locator("[data-plan]").getAttribute("data-plan"), planId);
    assert.match(await own.innerText(), /^#1 .* · docscript \(host credential\) · entities: 3 created/);
    assert.match(await own.innerText(), /relations: 3 created/);

    // A script that fails: its error is the preview's answer, the earlier "Committed" message gone.
    await page.locator("#edit-script").fill('throw new Error("no such clip: intro");');
    await step("filling #edit-script");
    await page.getByRole("button", { name: "Preview" }).click();
    await step('clicking "Preview"');
    const failure = page.locator('[data-preview="error"]');
    await failure.waitFor({ timeout: 20_000 });
    assert.match(await failure.innerText(), /no such clip: intro/);
    assert.equal(await page.locator("[data-committed]").count(), 0, "no stale Committed message");
    assert.equal(await page.getByRole("button", { name: "Commit" }).isDisabled(), true);
    await checkPage("documents-script-failed");
    assert.deepEqual(errors, []);
  });
});

describe("the console page, served by npm start: another client, navigation, no network", () => {
  test("documents: another client's commit straight to the document server shows in the change log and the drawing", async () => {
    await page.goto(`${origin}/#/documents`);
    await step("opening the documents page");
    await page.locator('#change-log li[data-seq="1"]').waitFor();
    assert.equal(await page.locator("#timeline .lane-label").count(), 3);
    // Another client: the edit-script tool of a separate program, on the module's document server.
    const other = createDocScriptTool({
      httpOrigin: documentServer,
      authToken: documentToken,
      userId: "voice-over-script",
      documents: ["sample-timeline"],
    });
    let planId: string;
    try {
      const run = await other.handle({
        op: "run-edit-script",
        doc_id: "sample-timeline",
        script: "entities.create({ entityKind: 'track', payload: { role: 'bgm', name: 'voice over' } });",
      });
      assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run));
      planId = run.plan_id;
      const committed = await other.handle({ op: "commit-plan", doc_id: "sample-timeline", plan_id: planId });
      assert.ok(committed.ok && committed.op === "commit-plan" && committed.status === "committed");
    } finally {
      await other.close();
    }
    // The page checks the log every 3 s: the new entry heads it and the drawing gains the lane.
    const theirs = page.locator('#change-log li[data-seq="2"]');
    await theirs.waitFor({ timeout: 15_000 });
    assert.match(
      await theirs.innerText(),
      /^#2 .* · voice-over-script \(document token\) · entity: 1 created · plan plan_/,
    );
    assert.equal(await theirs.locator("[data-plan]").getAttribute("data-plan"), planId);
    assert.equal(await page.locator("#change-log li").first().getAttribute("data-seq"), "2");
    await page.waitForFunction(() => document.querySelectorAll("#timeline .lane-label").length === 4);
    // The new lane takes its place by role (bgm, after the video, before the captions), then by name,
    // whatever its random id: the lanes do not jump between redraws.
    assert.deepEqual(await page.locator("#timeline .lane-label").allTextContents(), [
      "Main (video)",
      "Music (bgm)",
      "voice over (bgm)",
      "Captions (caption)",
    ]);
    await checkPage("documents");
    assert.deepEqual(errors, []);
  });

  test("signed in with the token, the navigation works; signing out of the documents page stops its polling", async () => {
    const other = await browser.newContext();
    try {
      const second = await other.newPage();
      const secondErrors = watchErrors(second);
      await second.goto(origin);
      await assertAccessible(second, "opening the page");
      await second.getByLabel("Console token").fill(readFileSync(serve.tokenFile ?? "", "utf8").trim());
      await assertAccessible(second, 'filling "Console token"');
      await second.getByRole("button", { name: "Sign in" }).click();
      await assertAccessible(second, 'clicking "Sign in"');
      await second.getByRole("heading", { name: "Modules and tools", level: 1 }).waitFor();
      await second.goto(`${origin}/#/documents`);
      await assertAccessible(second, "opening the documents page");
      await second.locator('#change-log li[data-seq="1"]').waitFor();
      // The one thing logged so far: the first visit's session check, answered 401 before sign-in.
      assert.deepEqual(secondErrors, [
        "console: Failed to load resource: the server responded with a status of 401 (Unauthorized)",
      ]);
      await second.getByRole("button", { name: "Sign out" }).click();
      await assertAccessible(second, 'clicking "Sign out"');
      await second.getByLabel("Console token").fill("half-typed");
      await assertAccessible(second, 'filling "Console token"');
      // Longer than a poll interval: a poll still running would be answered 401 and redraw the form.
      await second.waitForTimeout(4000);
      assert.equal(await second.getByLabel("Console token").inputValue(), "half-typed");
      assert.equal(secondErrors.length, 1, "no request after signing out was answered 401");
    } finally {
      await other.close();
    }
  });

  test("no CDN, no network: every request the pages made went to this console", () => {
    assert.ok(ui.requested.length > 20, `the pages were visited (${ui.requested.length} requests)`);
    const assets = new Set(ui.requested.filter((url) => url.startsWith(`${origin}/assets/`)));
    // The stylesheet and the page's modules (served from their TypeScript with the types stripped).
    assert.ok(assets.has(`${origin}/assets/console.css`) && assets.has(`${origin}/assets/console.ts`));
    for (const asset of assets) assert.match(asset, /\/assets\/(console\.css|[a-z-]+\.ts)$/);
    assert.deepEqual(
      ui.requested.filter((url) => !url.startsWith(`${origin}/`) && !url.startsWith("data:")),
      [],
    );
  });
});

const post = (path: string, body: string, headers: Record<string, string>, method = "POST") =>
  rawRequest(`${origin}${path}`, body, headers, method);
