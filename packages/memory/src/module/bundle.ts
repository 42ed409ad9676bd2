/**
 * The memory module as a Tackle bundle (the mesh's bundle contract): the 27 memory tools over an
 * embedded memory service on SQLite, served on loopback to this process only. `tackle serve` loads
 * it among its built-in modules when this file exists.
 *
 * Environment: `TACKLE_MEMORY_URL` + `TACKLE_MEMORY_API_KEY` use an existing service instead;
 * otherwise `TACKLE_MEMORY_STORE` (a SQLite path or a `postgres://` URL; default
 * `$TACKLE_HOME/memory.db`, `TACKLE_HOME` defaulting to `~/.tackle`) and `TACKLE_MEMORY_TENANT`
 * (default `local`).
 */
import { randomBytes } from "node:crypto";
import { homedir } from "node:os";
import { join } from "node:path";
import { type AnyTool, defineTool, type Logger, ToolError } from "@tackle/core";
import { z } from "zod";
import { MemoryClient } from "../client/memory-client.ts";
import { serveMemory } from "../server/serve-memory.ts";
import { withoutPassword } from "../server/without-password.ts";
import { createMemoryTools } from "../tools/create-memory-tools.ts";
import { memoryResourcesSeat } from "./resources-seat.ts";
import { withSampledConsolidation } from "./sampled-consolidation.ts";
import { defaultSamplingTimeoutMs, withSampledProfile } from "./sampled-profile.ts";

export { withoutPassword };

export interface MemoryBundleContext {
  readonly module: string;
  readonly node: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly logger: Logger;
}

export interface MemoryBundle {
  readonly tools: readonly AnyTool[];
  close(): Promise<void>;
}

/** Where the embedded store lives when nothing says otherwise. */
export function defaultMemoryStore(env: Readonly<Record<string, string | undefined>>): string {
  return env.TACKLE_MEMORY_STORE ?? join(env.TACKLE_HOME ?? join(homedir(), ".tackle"), "memory.db");
}

/** Tackle's own settings (never secrets of other programs) from the process, under the bundle's env. */
function settings(context: MemoryBundleContext): Readonly<Record<string, string | undefined>> {
  const fromProcess = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => name.startsWith("TACKLE_")),
  );
  return { ...fromProcess, ...context.env };
}

export default async function memoryBundle(context: MemoryBundleContext): Promise<MemoryBundle> {
  const { logger } = context;
  // The runtime hands bundles an explicit environment; TACKLE_HOME and TACKLE_MEMORY_* are still ours to read.
  const env = settings(context);
  if (env.TACKLE_MEMORY_URL !== undefined && env.TACKLE_MEMORY_URL !== "") {
    const client = new MemoryClient({
      baseUrl: env.TACKLE_MEMORY_URL,
      ...(env.TACKLE_MEMORY_API_KEY ? { apiKey: env.TACKLE_MEMORY_API_KEY } : {}),
      // The operator's own setting, not a URL a model or a user sent: a service on loopback or the
      // private network (tackle-memory serve listens on 127.0.0.1:4280 by default) is what it names.
      allowPrivateNetwork: true,
    });
    logger.info("memory module uses an existing service", { url: client.baseUrl, module: context.module });
    return {
      tools: withSeat(sampledTools(client, env, logger), context.module, client),
      close: async () => {},
    };
  }
  const store = defaultMemoryStore(env);
  // A key made for this process alone: the embedded service answers no one else.
  const apiKey = randomBytes(32).toString("base64url");
  const server = await serveMemory({
    store,
    apiKeys: { [apiKey]: env.TACKLE_MEMORY_TENANT ?? "local" },
    host: "127.0.0.1",
    port: 0,
    logger,
  });
  logger.info("memory module started an embedded service", {
    store: withoutPassword(store),
    url: server.url,
    module: context.module,
  });
  const client = new MemoryClient({ baseUrl: server.url, apiKey, allowPrivateNetwork: true });
  return {
    tools: withSeat(sampledTools(client, env, logger), context.module, client),
    close: () => server.close(),
  };
}

/**
 * The memory tools, the profile summarized and consolidation's merges written by the calling MCP
 * client's model where the service has no model and the client offers sampling (each request within
 * TACKLE_MEMORY_SAMPLING_TIMEOUT_MS, default 20 s).
 */
function sampledTools(
  client: MemoryClient,
  env: Readonly<Record<string, string | undefined>>,
  logger: Logger,
): AnyTool[] {
  const timeoutMs = Number(env.TACKLE_MEMORY_SAMPLING_TIMEOUT_MS ?? defaultSamplingTimeoutMs);
  const deadline = Number.isFinite(timeoutMs) && timeoutMs > 0 ? timeoutMs : defaultSamplingTimeoutMs;
  return withSampledConsolidation(
    withSampledProfile(createMemoryTools(client), deadline, logger),
    deadline,
    logger,
  );
}

/**
 * The tools and the module's `mcp` seat (served by the console and tackle mcp as MCP prompts and
 * resources, not as tools): `guide`, which tells a model what each memory tool is for, from the tools'
 * own descriptions, and the memories as resources (resources-seat.ts).
 */
function withSeat(tools: readonly AnyTool[], module: string, client: MemoryClient): AnyTool[] {
  const guide = {
    name: "guide",
    title: "Using memory",
    description:
      "What each memory tool is for and when to call it, for an agent that keeps long-term memory.",
  };
  const text = [
    `You have long-term memory through the ${module}.* tools. Search before you answer from what you know of the user; add what is worth keeping once it is settled; give feedback on memories that helped or misled.`,
    "",
    ...tools.map((tool) => `- ${module}.${tool.name}: ${tool.description}`),
  ].join("\n");
  return [
    ...tools,
    ...memoryResourcesSeat(client),
    defineTool({
      name: "mcp.prompts",
      description: "This module's MCP prompts.",
      input: z.object({}),
      annotations: { readOnlyHint: true },
      execute: () => ({ prompts: [guide] }),
    }),
    defineTool({
      name: "mcp.prompt",
      description: "One of this module's MCP prompts.",
      input: z.object({ name: z.string(), arguments: z.record(z.string(), z.string()).default({}) }),
      annotations: { readOnlyHint: true },
      execute: ({ name }) => {
        if (name !== guide.name)
          throw new ToolError("invalid_input", `No prompt "${name}" here: the memory module offers "guide"`);
        return {
          description: guide.description,
          messages: [{ role: "user", content: { type: "text", text } }],
        };
      },
    }),
  ];
}
