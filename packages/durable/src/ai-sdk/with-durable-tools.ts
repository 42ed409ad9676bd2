/** AI SDK tools that emit frames, journal through `ctx.step` and pause for approval under a per-tool policy. */

import { setOwn } from "@tackle/core/internal";
import { asSchema, type ToolSet } from "ai";
import { runIntegratedTool } from "../integration/run-integrated-tool.ts";
import { type ToolPolicies, validatePolicies } from "../policy/tool-policy.ts";
import type { NodeContext } from "../runner/node-context.ts";

/**
 * Wraps each executable tool. Policies are plain data keyed by tool name (`{ show, redact, approve }`);
 * the tool always receives the real arguments. Pass `abortSignal: ctx.signal` to `generateText` so a
 * pause stops the model loop at once.
 */
export function withDurableTools<Tools extends ToolSet>(
  ctx: NodeContext,
  tools: Tools,
  policies: ToolPolicies = {},
): Tools {
  const checked = validatePolicies(policies);
  const wrapped: Record<string, unknown> = {};
  for (const [name, definition] of Object.entries(tools)) {
    const execute = definition.execute;
    if (execute === undefined) {
      setOwn(wrapped, name, definition);
      continue;
    }
    // Tool names are keys: a tool named `__proto__` is defined as a key, not assigned as the prototype.
    setOwn(wrapped, name, {
      ...definition,
      execute: (input: unknown, options: Parameters<typeof execute>[1]) =>
        runIntegratedTool(
          ctx,
          name,
          input,
          checked[name] ?? {},
          (args) => execute(args as never, options),
          // The tool's own schema: an approver's edited arguments are checked against it.
          checked[name]?.approve === true
            ? {
                inputSchema: asSchema(definition.inputSchema).jsonSchema as PromiseLike<
                  Record<string, unknown>
                >,
              }
            : {},
        ),
    });
  }
  return wrapped as Tools;
}
