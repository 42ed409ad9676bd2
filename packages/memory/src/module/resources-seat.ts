/**
 * The memory module's MCP resources, through the `mcp` seat (tools named `mcp.<verb>` that the console
 * and `tackle mcp` serve as resources, not as tools): `memory://tenant`, the whole tenant's context
 * bundle, and the template `memory://users/{user_id}`, one user's; each read is a context bundle within
 * its token budget. `mcp.versions` tells a change (counts and the latest memories' edits) so a
 * subscriber hears of a write made anywhere; `mcp.complete` completes `user_id` from the users of the
 * most recent memories (a bounded look, not a scan).
 */
import { createHash } from "node:crypto";
import { type AnyTool, defineTool, ToolError } from "@tackle/core";
import { z } from "zod";
import type { MemoryClient } from "../client/memory-client.ts";
import type { ScopeRequest } from "../schemas/synthesis.ts";

const tenantUri = "memory://tenant";
const userTemplate = "memory://users/{user_id}";
/** Estimated tokens a resource read may use (the context bundle's own budget). */
const readBudget = 2_000;

/** The scope a URI names, or a `not_found` error. */
function scopeOf(uri: string): ScopeRequest {
  if (uri === tenantUri) return { wholeTenant: true };
  const match = /^memory:\/\/users\/([^/?#]+)$/.exec(uri);
  if (match === null)
    throw new ToolError("not_found", `No memory resource "${uri}"`, {
      data: { resource: "mcp_resource", id: uri },
    });
  return { userId: decodeURIComponent(match[1] as string) };
}

export function memoryResourcesSeat(client: MemoryClient): AnyTool[] {
  return [
    defineTool({
      name: "mcp.resources",
      description: "This module's MCP resources: the tenant's memory, and the template for one user's.",
      input: z.object({}),
      annotations: { readOnlyHint: true },
      execute: () => ({
        resources: [
          {
            uri: tenantUri,
            name: "tenant",
            title: "Memory of the whole tenant",
            description: "The tenant's context bundle: profile, core memory, recent memories and events",
            mimeType: "application/json",
          },
        ],
        resourceTemplates: [
          {
            uriTemplate: userTemplate,
            name: "user",
            title: "Memory of one user",
            description: "One user's context bundle: profile, core memory, recent memories and events",
            mimeType: "application/json",
          },
        ],
      }),
    }),
    defineTool({
      name: "mcp.read",
      description: "Reads one of this module's MCP resources: a context bundle within its token budget.",
      input: z.object({ uri: z.string() }),
      annotations: { readOnlyHint: true },
      execute: async ({ uri }, context) => {
        const bundle = await client.contextBundle(
          { ...scopeOf(uri), tokenBudget: readBudget },
          { signal: context.signal },
        );
        return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(bundle) }] };
      },
    }),
    defineTool({
      name: "mcp.versions",
      description: "A token per resource named that changes when its memories do.",
      input: z.object({ uris: z.array(z.string()).max(100) }),
      annotations: { readOnlyHint: true },
      execute: async ({ uris }, context) => {
        const versions: Record<string, string> = {};
        for (const uri of uris) {
          try {
            const state = await client.unifiedState(scopeOf(uri), { signal: context.signal });
            const latest = state.recentMemories.map((memory) => [
              memory.id,
              memory.version,
              memory.updatedAt,
            ]);
            versions[uri] = createHash("sha256")
              .update(JSON.stringify([state.counts, latest]))
              .digest("base64url")
              .slice(0, 16);
          } catch {
            // Not one of ours, or the service did not answer: no version, no update.
          }
        }
        return { versions };
      },
    }),
    defineTool({
      name: "mcp.complete",
      description: "Completes the user template's user_id from the users of the most recent memories.",
      input: z.object({
        ref: z.object({ type: z.string(), uri: z.string().optional() }).loose(),
        argument: z.object({ name: z.string(), value: z.string() }),
      }),
      annotations: { readOnlyHint: true },
      execute: async ({ ref, argument }, context) => {
        if (ref.uri !== userTemplate || argument.name !== "user_id") return { values: [] };
        const state = await client.unifiedState({ wholeTenant: true }, { signal: context.signal });
        const users = new Set<string>();
        for (const memory of state.recentMemories) {
          if (typeof memory.userId === "string" && memory.userId.startsWith(argument.value))
            users.add(memory.userId);
        }
        return { values: [...users].sort() };
      },
    }),
  ];
}
