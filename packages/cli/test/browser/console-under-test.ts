/**
 * A console under test: `tackle serve` (or `npm start`, as the README says) on a free loopback port,
 * and a Chromium context on its page, every request it made recorded. `step` is what every step of a
 * browser test ends with (axe-core finds nothing serious); `checkPage` adds no console error and a
 * screenshot for the README's pictures.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { freePort } from "@tackle/test-support";
import type { BrowserContext, Page } from "playwright-core";
import { cleanEnv, type ServeProcess, startServe, tempHome } from "../tackle-process.ts";
import { assertAccessible, type Browser, launchChromium, screenshotDir, watchErrors } from "./chromium.ts";

export interface ConsoleUnderTest {
  readonly serve: ServeProcess;
  readonly browser: Browser;
  readonly context: BrowserContext;
  readonly page: Page;
  /** The page's console errors and uncaught errors so far. */
  readonly errors: string[];
  readonly origin: string;
  /** Every URL the context requested. */
  readonly requested: string[];
  /** The one-time sign-in URL `tackle serve` printed. */
  signInUrl(): string;
  /** axe-core finds no serious or critical violation after `what` was done. */
  step(what: string): Promise<void>;
  /** The checks a page gets once drawn: no console errors, `step`, a screenshot named `name`. */
  checkPage(name: string): Promise<void>;
  close(): Promise<void>;
}

export async function openConsole(
  options: { readonly env?: Record<string, string>; readonly viaNpmStart?: boolean } = {},
): Promise<ConsoleUnderTest> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const home = tempHome();
  const shots = screenshotDir();
  // Launched first: a missing Chromium fails here with the install command, before anything starts.
  const browser = await launchChromium();
  const serve = await startServe(
    options.viaNpmStart === true ? [] : ["--builtin"],
    cleanEnv({ TACKLE_HOME: home.path, MESH_CONSOLE_LISTEN: `127.0.0.1:${port}`, ...options.env }),
    undefined,
    { viaNpmStart: options.viaNpmStart === true },
  );
  const context = await browser.newContext();
  const requested: string[] = [];
  context.on("request", (request) => requested.push(request.url()));
  const page = await context.newPage();
  const errors = watchErrors(page);
  const step = (what: string) => assertAccessible(page, what);
  return {
    serve,
    browser,
    context,
    page,
    errors,
    origin,
    requested,
    signInUrl() {
      const url = /^sign in (\S+)$/m.exec(serve.banner)?.[1];
      assert.ok(url, `the banner prints a sign-in URL:\n${serve.banner}`);
      return url;
    },
    step,
    async checkPage(name) {
      await page.waitForLoadState("networkidle").catch(() => {});
      assert.deepEqual(errors, [], `no console errors on the ${name} page`);
      await step(`the ${name} page drawn`);
      const path = join(shots.path, `${name}.png`);
      await page.screenshot({ path, fullPage: true });
      assert.equal(readFileSync(path).subarray(1, 4).toString("latin1"), "PNG");
    },
    async close() {
      await browser.close();
      await serve.stop();
      home.remove();
      shots.remove();
    },
  };
}

/** A request as no browser sends it (any Origin, any Host, no Origin at all): its status and body. */
export function rawRequest(
  url: string,
  body: string,
  headers: Record<string, string>,
  method = "POST",
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      url,
      { method, headers: { "content-type": "application/json", ...headers } },
      (response) => {
        let text = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => {
          text += chunk;
        });
        response.on("end", () => resolve({ status: response.statusCode ?? 0, body: text }));
      },
    );
    outgoing.on("error", reject);
    outgoing.end(body);
  });
}
