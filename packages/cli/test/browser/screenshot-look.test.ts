/**
 * `npm run screenshots` rewrites a committed PNG only when its look changed: real Chromium screenshots
 * of a page whose clock time changed keep the committed file byte for byte; a page with a new block,
 * another size, or a new picture is written.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { Page } from "playwright-core";
import { type Browser, launchChromium } from "./chromium.ts";
import { compareLook, decodePng, updateScreenshots } from "./screenshot-look.ts";

let browser: Browser;
let page: Page;
const dirs: string[] = [];

before(async () => {
  browser = await launchChromium();
  page = await (await browser.newContext()).newPage();
});

after(async () => {
  await browser?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function dir(): string {
  const path = mkdtempSync(join(tmpdir(), "tackle-look-"));
  dirs.push(path);
  return path;
}

/** A page like the console's: a heading, a table of runs with a time, a form. */
async function shot(time: string, options: { extra?: boolean; rows?: number } = {}): Promise<Buffer> {
  const rows = Array.from(
    { length: options.rows ?? 6 },
    (_, index) => `<tr><td>demo-${index}</td><td>ok</td><td>${index === 0 ? time : "10:00:00"}</td></tr>`,
  ).join("");
  await page.setContent(`<!doctype html><html><body style="font-family:sans-serif;margin:20px">
    <h1>Durable runs</h1><table>${rows}</table>
    ${options.extra ? '<fieldset style="height:120px;background:#fde"><legend>amount</legend><input></fieldset>' : ""}
    <p style="height:300px">Edit the arguments</p></body></html>`);
  return page.screenshot({ fullPage: true });
}

test("Chromium's screenshots decode to their size in pixels", async () => {
  const png = await shot("10:00:00");
  const pixels = decodePng(png);
  assert.ok(pixels);
  assert.equal(pixels.width, 1280);
  assert.ok(pixels.height >= 900);
  // The page's white background, top left.
  assert.deepEqual([...pixels.data.subarray(0, 3)], [255, 255, 255]);
  assert.equal(decodePng(Buffer.from("not a png")), undefined);
});

test("a new clock time is the same look; a new block, another size, a new picture are changes", async () => {
  const committed = dir();
  const fresh = dir();
  const original = await shot("10:00:00");
  writeFileSync(join(committed, "runs.png"), original);
  writeFileSync(join(committed, "memory.png"), original);
  writeFileSync(join(committed, "modules.png"), original);

  const retimed = await shot("23:59:58");
  assert.notDeepEqual(retimed, original, "the bytes differ");
  assert.equal(compareLook(original, retimed).changed, false);
  writeFileSync(join(fresh, "runs.png"), retimed);

  // A new block within the same page height: only the pixels tell.
  const withForm = await shot("10:00:00", { extra: true });
  assert.equal(decodePng(withForm)?.height, decodePng(original)?.height);
  assert.match(compareLook(original, withForm).reason, /pixels .* differ/);
  assert.equal(compareLook(original, withForm).changed, true);
  writeFileSync(join(fresh, "memory.png"), withForm);

  // A longer page.
  const moreRows = await shot("10:00:00", { rows: 40 });
  assert.match(compareLook(original, moreRows).reason, /^size 1280×\d+ → 1280×\d+$/);
  assert.equal(compareLook(original, moreRows).changed, true);
  writeFileSync(join(fresh, "modules.png"), moreRows);

  writeFileSync(join(fresh, "documents.png"), original);

  const updates = updateScreenshots(fresh, committed);
  assert.deepEqual(
    updates.map((update) => [update.name, update.written]),
    [
      ["documents.png", true],
      ["memory.png", true],
      ["modules.png", true],
      ["runs.png", false],
    ],
  );
  assert.deepEqual(
    readFileSync(join(committed, "runs.png")),
    original,
    "the same look is kept byte for byte",
  );
  assert.deepEqual(readFileSync(join(committed, "memory.png")), withForm);
  assert.deepEqual(readFileSync(join(committed, "modules.png")), moreRows);
  assert.deepEqual(readFileSync(join(committed, "documents.png")), original);
});
