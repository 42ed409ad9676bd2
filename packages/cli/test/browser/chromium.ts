/**
 * Debian's Chromium driven by playwright-core, for the console's browser tests: a fresh profile per
 * launch, no network beyond loopback, and a clear failure (with the install command) when it is missing.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { underLoadMs } from "@tackle/test-support";
import { type BrowserContext, chromium, type Page } from "playwright-core";

export const chromiumPath = process.env.TACKLE_CHROMIUM ?? "/usr/bin/chromium";

export const chromiumArgs = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export interface Browser {
  /** A new context with its own fresh user-data-dir (no cookies, no storage). */
  newContext(): Promise<BrowserContext>;
  close(): Promise<void>;
}

/** Launches Chromium; throws (never skips) when it is not installed, naming the command that installs it. */
export async function launchChromium(executablePath: string = chromiumPath): Promise<Browser> {
  if (!existsSync(executablePath)) {
    throw new Error(
      `Chromium is not installed at ${executablePath}: run \`apt-get install -y chromium\` (or bash scripts/ensure-services.sh), then run the tests again`,
    );
  }
  const contexts: { context: BrowserContext; dir: string }[] = [];
  return {
    async newContext() {
      const dir = mkdtempSync(join(tmpdir(), "tackle-chromium-"));
      const context = await chromium.launchPersistentContext(dir, {
        executablePath,
        headless: true,
        args: chromiumArgs,
        viewport: { width: 1280, height: 900 },
        timeout: underLoadMs(30_000),
      });
      // Playwright's waits (a click, a locator's waitFor) get 30 s on a quiet machine, scaled by the
      // load: a page that renders slowly on a busy machine is not what these tests check.
      context.setDefaultTimeout(underLoadMs(30_000));
      contexts.push({ context, dir });
      return context;
    },
    async close() {
      for (const { context, dir } of contexts.splice(0)) {
        await context.close().catch(() => {});
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** Collects console errors and uncaught page errors, so a test can assert there were none. */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(`console: ${message.text()}`);
  });
  page.on("pageerror", (error) => errors.push(`page: ${error.message}`));
  return errors;
}

const axeSource = (() => {
  const require = createRequire(import.meta.url);
  return (require("axe-core") as { source: string }).source;
})();

export interface AxeViolation {
  readonly id: string;
  readonly impact: string | null;
  readonly help: string;
  readonly nodes: readonly { readonly target: readonly string[] }[];
}

/** Runs axe-core in the page (evaluated through the debugging protocol, so the page's CSP stays on). */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as {
        axe: { run(context: unknown, options: unknown): Promise<{ violations: AxeViolation[] }> };
      }
    ).axe;
    const result = await axe.run(document, { resultTypes: ["violations"] });
    return result.violations.map((violation) => ({
      id: violation.id,
      impact: violation.impact,
      help: violation.help,
      nodes: violation.nodes.map((node) => ({ target: node.target })),
    }));
  });
  return violations.filter((violation) => violation.impact === "serious" || violation.impact === "critical");
}

/**
 * The check every step of a browser test ends with: axe-core finds no serious or critical violation
 * on the page as it stands after `step` (a click, a typed value, an answer drawn), naming each one.
 */
export async function assertAccessible(page: Page, step: string): Promise<void> {
  const violations = await seriousViolations(page);
  assert.deepEqual(
    violations.map(
      (violation) =>
        `${violation.impact} ${violation.id}: ${violation.help} at ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`,
    ),
    [],
    `axe-core finds no serious or critical violation after: ${step}`,
  );
}

/** Where screenshots go: TACKLE_SCREENSHOT_DIR (the screenshots script sets it), else a temp dir. */
export function screenshotDir(): { path: string; remove(): void } {
  const configured = process.env.TACKLE_SCREENSHOT_DIR;
  if (configured !== undefined && configured !== "") {
    mkdirSync(configured, { recursive: true });
    return { path: configured, remove: () => {} };
  }
  const path = mkdtempSync(join(tmpdir(), "tackle-screenshots-"));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}
