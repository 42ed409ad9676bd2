/**
 * `createMemoryTools`: the memory service's whole surface as 27 `@tackle/core` tools, so every
 * adapter (AI SDK, OpenAI, MCP, LangChain, the mesh) serves them. Every call goes through the client.
 */
import type { AnyTool } from "@tackle/core";
import { adminTools } from "./admin-tools.ts";
import { lifecycleTools } from "./lifecycle-tools.ts";
import type { MemoryToolClient } from "./memory-tool-client.ts";
import { searchTools } from "./search-tools.ts";
import { synthesisTools } from "./synthesis-tools.ts";
import { writeTools } from "./write-tools.ts";

export function createMemoryTools(client: MemoryToolClient): AnyTool[] {
  return [
    ...searchTools(client),
    ...writeTools(client),
    ...lifecycleTools(client),
    ...synthesisTools(client),
    ...adminTools(client),
  ];
}
