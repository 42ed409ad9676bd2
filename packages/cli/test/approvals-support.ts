/** Shared by the approval tests: the ledger fixture, its lines, and what an approval answer looks like. */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { readConsoleToken } from "../src/console/console-token.ts";
import { cleanEnv, type ServeProcess } from "./tackle-process.ts";

export const ledgerBundle = fileURLToPath(new URL("./fixtures/ledger-bundle.ts", import.meta.url));

/** The environment of a server with the ledger module, its home and ledger file under `home`. */
export function ledgerEnv(home: string): NodeJS.ProcessEnv {
  return cleanEnv({
    TACKLE_HOME: home,
    TACKLE_LOG_LEVEL: "silent",
    MESH_TOOL_MODULES: `ledger=${ledgerBundle}`,
    LEDGER_FILE: join(home, "ledger.jsonl"),
  });
}

/** The payments the ledger holds: one per time `ledger.pay` really ran. */
export function ledgerLines(home: string): { to: string; amount: number; memo?: string }[] {
  const file = join(home, "ledger.jsonl");
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as { to: string; amount: number; memo?: string });
}

/** A tool answer's structured content (the tool's output, or its error). */
export function output(result: unknown): Record<string, unknown> {
  const structured = (result as { structuredContent?: unknown }).structuredContent;
  if (typeof structured === "object" && structured !== null) return structured as Record<string, unknown>;
  const text = (result as { content?: { type: string; text?: string }[] }).content?.[0]?.text ?? "{}";
  return JSON.parse(text) as Record<string, unknown>;
}

/** The open approvals, as `tackle.approvals` lists them. */
export async function openApprovals(
  client: Client,
): Promise<{ approval: string; tool: string; arguments: unknown }[]> {
  const listed = await client.callTool({ name: "tackle.approvals", arguments: {} });
  return output(listed).approvals as { approval: string; tool: string; arguments: unknown }[];
}

/** What the person at the client answers to a form (MCP's `ElicitResult`); `context` as the SDK gives it. */
export type ElicitHandler = (
  request: { params: Record<string, unknown> },
  context: { mcpReq: { id: string | number } },
) => Promise<unknown>;

/** Resolves once `check` holds, polling; fails past `ms`. */
export async function until(
  check: () => boolean | Promise<boolean>,
  ms: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * An SDK client of the console `serve` over HTTP with its bearer token, declaring elicitation and
 * answering forms with `elicit` when given; `name` is its client name.
 */
export async function consoleClient(
  serve: ServeProcess | undefined,
  name: string,
  elicit?: ElicitHandler,
): Promise<Client> {
  const client = new Client(
    { name, version: "1.0.0" },
    elicit === undefined ? {} : { capabilities: { elicitation: {} } },
  );
  if (elicit !== undefined) client.setRequestHandler("elicitation/create", elicit as never);
  const headers = { authorization: `Bearer ${readConsoleToken(serve?.tokenFile ?? "")}` };
  await client.connect(
    new StreamableHTTPClientTransport(new URL(serve?.url ?? ""), { requestInit: { headers } }),
  );
  return client;
}
