/**
 * The console page's first load on loopback, in Debian's Chromium (playwright-core): `tackle serve`
 * (embedded, built-in modules) is signed in once; each load is a new tab with the HTTP cache disabled,
 * timed from navigation start to the modules table and every tool's panel on screen (a performance mark
 * the page sets; a tool's form is built when its panel is opened). Side by side: the same browser loading a static page of the shell's size from a bare
 * node:http server (the loopback floor), and the console's own DOMContentLoaded and load events.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/cli/console-first-load.ts [--loads=30]
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "@tackle/test-support";
import { chromium } from "playwright-core";

const loads = Number(/^--loads=(\d+)$/.exec(process.argv[2] ?? "")?.[1] ?? 30);
const root = fileURLToPath(new URL("../../", import.meta.url));
const chromiumArgs = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

const home = mkdtempSync(join(tmpdir(), "tackle-bench-home-"));
const profile = mkdtempSync(join(tmpdir(), "tackle-bench-chromium-"));
const port = await freePort();
const serve: ChildProcess = spawn(
  process.execPath,
  ["--conditions=@tackle/source", join(root, "packages/cli/src/main.ts"), "serve", "--builtin"],
  {
    env: {
      ...process.env,
      TACKLE_HOME: home,
      MESH_CONSOLE_LISTEN: `127.0.0.1:${port}`,
      TACKLE_LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "inherit"],
  },
);
const signIn = await new Promise<string>((resolve, reject) => {
  let out = "";
  const timer = setTimeout(() => reject(new Error(`serve not ready: ${out}`)), 60_000);
  serve.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
    const url = /^sign in (\S+)$/m.exec(out)?.[1];
    if (url !== undefined && /^token file /m.test(out)) {
      clearTimeout(timer);
      resolve(url);
    }
  });
});

const shellBytes = (await (await fetch(`http://127.0.0.1:${port}/`)).text()).length;
const staticPage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>static</title></head><body><main>${"x".repeat(Math.max(0, shellBytes - 120))}</main></body></html>`;
const floor = createServer((_request, response) => {
  response.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
  response.end(staticPage);
});
await new Promise<void>((resolve) => floor.listen(0, "127.0.0.1", resolve));
const floorPort = (floor.address() as { port: number }).port;

const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.TACKLE_CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: chromiumArgs,
});
try {
  const first = await context.newPage();
  await first.goto(signIn);
  await first.locator("#modules tbody tr").first().waitFor({ timeout: 30_000 });
  await first.close();

  interface Sample {
    ready: number;
    domContentLoaded: number;
    load: number;
    bytes: number;
  }
  const consoleSamples: Sample[] = [];
  const floorSamples: Sample[] = [];
  for (let index = 0; index < loads + 3; index++) {
    for (const [url, samples, mark] of [
      [`http://127.0.0.1:${port}/#/modules`, consoleSamples, "tackle:modules-rendered"],
      [`http://127.0.0.1:${floorPort}/`, floorSamples, undefined],
    ] as const) {
      const page = await context.newPage();
      const cdp = await context.newCDPSession(page);
      await cdp.send("Network.setCacheDisabled", { cacheDisabled: true });
      await page.goto(url, { waitUntil: "load" });
      if (mark !== undefined) {
        await page.waitForFunction((name) => performance.getEntriesByName(name).length > 0, mark, {
          timeout: 30_000,
        });
      }
      const sample = await page.evaluate((name) => {
        const navigation = performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming;
        const resources = performance.getEntriesByType("resource") as PerformanceResourceTiming[];
        return {
          ready:
            name === undefined
              ? navigation.loadEventEnd
              : (performance.getEntriesByName(name)[0]?.startTime ?? -1),
          domContentLoaded: navigation.domContentLoadedEventEnd,
          load: navigation.loadEventEnd,
          bytes: navigation.transferSize + resources.reduce((sum, entry) => sum + entry.transferSize, 0),
        };
      }, mark);
      // The first three loads warm the processes up and are not counted.
      if (index >= 3) samples.push(sample);
      await page.close();
    }
  }

  const quantile = (values: number[], q: number) => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
  };
  const row = (name: string, samples: Sample[], what: string) => {
    const ready = samples.map((sample) => sample.ready);
    return `| ${name.padEnd(44)} | ${what.padEnd(36)} | ${quantile(ready, 0.5).toFixed(0).padStart(6)} | ${quantile(ready, 0.9).toFixed(0).padStart(6)} | ${Math.max(
      ...ready,
    )
      .toFixed(0)
      .padStart(6)} | ${quantile(
      samples.map((sample) => sample.domContentLoaded),
      0.5,
    )
      .toFixed(0)
      .padStart(8)} | ${(
      quantile(
        samples.map((sample) => sample.bytes),
        0.5,
      ) / 1024
    )
      .toFixed(1)
      .padStart(7)} |`;
  };
  console.log(
    `loads per row: ${loads} (after 3 warm-up), cache disabled, Chromium ${context.browser()?.version() ?? "(persistent)"}, Node ${process.versions.node}, ${new Date().toISOString().slice(0, 10)}\n`,
  );
  console.log(
    "| page                                         | ready when                           | p50 ms | p90 ms | max ms | DCL p50 ms | KiB p50 |",
  );
  console.log(
    "| -------------------------------------------- | ------------------------------------ | -----: | -----: | -----: | ---------: | ------: |",
  );
  console.log(row("static page, bare node:http (loopback floor)", floorSamples, "load event"));
  console.log(
    row("console modules page (tackle serve --builtin)", consoleSamples, "modules and every tool listed"),
  );
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
  floor.close();
  serve.kill("SIGTERM");
  await new Promise((resolve) => serve.once("exit", resolve));
  rmSync(home, { recursive: true, force: true });
}
