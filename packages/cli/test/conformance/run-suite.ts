/** Runs scenarios of the public MCP conformance suite (offline, from node_modules) and reads its checks. */
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const suiteBin = join(
  dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/conformance/package.json")),
  "dist/index.js",
);

export interface ScenarioResult {
  readonly scenario: string;
  readonly success: number;
  readonly failure: number;
  readonly warning: number;
  readonly failures: readonly string[];
  readonly warnings: readonly string[];
}

/** Every server scenario of the suite (its `list` command's 32). */
export const serverScenarios = [
  "server-initialize",
  "ping",
  "logging-set-level",
  "completion-complete",
  "tools-list",
  "tools-call-simple-text",
  "tools-call-image",
  "tools-call-audio",
  "tools-call-embedded-resource",
  "tools-call-mixed-content",
  "tools-call-error",
  "tools-call-with-progress",
  "tools-call-with-logging",
  "tools-call-sampling",
  "tools-call-elicitation",
  "json-schema-2020-12",
  "elicitation-sep1034-defaults",
  "elicitation-sep1330-enums",
  "resources-list",
  "resources-read-text",
  "resources-read-binary",
  "resources-templates-read",
  "resources-subscribe",
  "resources-unsubscribe",
  "prompts-list",
  "prompts-get-simple",
  "prompts-get-with-args",
  "prompts-get-embedded-resource",
  "prompts-get-with-image",
  "dns-rebinding-protection",
  "server-sse-polling",
  "server-sse-multiple-streams",
] as const;

/**
 * The scenarios run against `tackle mcp` through the stdio bridge: all but the transport ones
 * (DNS rebinding, SSE), which would test the bridge's HTTP, not `tackle mcp`.
 */
export const stdioScenarios = serverScenarios.filter(
  (scenario) => scenario !== "dns-rebinding-protection" && !scenario.startsWith("server-sse-"),
);

/**
 * The scenarios run with the fixture on another node: those of tools that need nothing of the client
 * while they run (elicitation and sampling reach tools in the serving process only, ADR 0264).
 */
export const meshScenarios = stdioScenarios.filter(
  (scenario) => !scenario.includes("elicitation") && scenario !== "tools-call-sampling",
);

/** Runs one scenario against `url`, in a temporary folder (the suite writes its results to disk). */
export async function runScenario(url: string, scenario: string): Promise<ScenarioResult> {
  const folder = mkdtempSync(join(tmpdir(), "tackle-conformance-"));
  try {
    await run(process.execPath, [suiteBin, "server", "--url", url, "--scenario", scenario, "-o", folder], {
      cwd: folder,
      timeout: 120_000,
    }).catch((error: { code?: number }) => {
      // The suite exits 1 when a check failed; the checks say which.
      if (typeof error.code !== "number") throw error;
    });
    const checks: { id: string; status: string; errorMessage?: string }[] = [];
    for (const entry of readdirSync(folder)) {
      checks.push(...(JSON.parse(readFileSync(join(folder, entry, "checks.json"), "utf8")) as typeof checks));
    }
    const count = (status: string) => checks.filter((check) => check.status === status).length;
    return {
      scenario,
      success: count("SUCCESS"),
      failure: count("FAILURE"),
      warning: count("WARNING"),
      failures: checks
        .filter((check) => check.status === "FAILURE")
        .map((check) => `${check.id}: ${check.errorMessage ?? ""}`),
      warnings: checks
        .filter((check) => check.status === "WARNING")
        .map((check) => `${check.id}: ${check.errorMessage ?? ""}`),
    };
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

/** The results as the markdown table rows `docs/mcp-conformance.md` quotes. */
export function resultTable(results: readonly ScenarioResult[]): string {
  return results
    .map(
      (result) =>
        `| ${result.scenario} | ${result.failure === 0 ? "pass" : "FAIL"} | ${result.success} | ${result.warning} |`,
    )
    .join("\n");
}
