/**
 * Runs the memory agent against an embedded memory service (SQLite in a scratch folder, loopback):
 * one session teaches it something, a later session benefits.
 *
 *   node_modules/.bin/node --conditions=@tackle/source examples/memory-agent/main.ts
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemoryClient } from "@tackle/memory";
import { serveMemory } from "@tackle/memory/server";
import { createMemoryAgent } from "./create-memory-agent.ts";
import { createScriptedModel } from "./scripted-model.ts";

export interface Exchange {
  readonly session: string;
  readonly user: string;
  readonly agent: string;
}

export async function runMemoryAgentDemo(options: { readonly contextTimeoutMs?: number } = {}): Promise<{
  transcript: Exchange[];
  client: MemoryClient;
  close(): Promise<void>;
}> {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-agent-"));
  const server = await serveMemory({
    store: join(directory, "memory.db"),
    apiKeys: { "demo-key": "demo" },
    port: 0,
  });
  const client = new MemoryClient({ baseUrl: server.url, apiKey: "demo-key", allowPrivateNetwork: true });
  const agent = createMemoryAgent({ model: createScriptedModel(), client, ...options });
  const script = [
    { session: "monday", user: "What should I cook tonight?" },
    { session: "monday", user: "Remember that I am vegetarian" },
    { session: "friday", user: "What should I cook tonight?" },
  ];
  const transcript: Exchange[] = [];
  for (const step of script) {
    transcript.push({ ...step, agent: await agent.ask("sam", step.session, step.user) });
  }
  return {
    transcript,
    client,
    async close() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

if (import.meta.main) {
  const demo = await runMemoryAgentDemo();
  for (const exchange of demo.transcript)
    console.log(
      `[${exchange.session}] sam: ${exchange.user}\n[${exchange.session}] agent: ${exchange.agent}\n`,
    );
  await demo.close();
}
