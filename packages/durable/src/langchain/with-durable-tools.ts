/** LangChain tools that emit frames, journal through `ctx.step` and pause for approval under a per-tool policy. */
import { type StructuredToolInterface, tool } from "@langchain/core/tools";
import { runIntegratedTool } from "../integration/run-integrated-tool.ts";
import { type ToolPolicies, validatePolicies } from "../policy/tool-policy.ts";
import type { NodeContext } from "../runner/node-context.ts";

/** Wraps each tool in a structured tool of the same name, description and schema. */
export function withDurableTools(
  ctx: NodeContext,
  tools: readonly StructuredToolInterface[],
  policies: ToolPolicies = {},
): StructuredToolInterface[] {
  const checked = validatePolicies(policies);
  return tools.map(
    (original) =>
      tool(
        (input: unknown, config) =>
          runIntegratedTool(ctx, original.name, input, checked[original.name] ?? {}, (args) =>
            original.invoke(args as never, config),
          ),
        {
          name: original.name,
          description: original.description,
          // biome-ignore lint/suspicious/noExplicitAny: the original's schema, whatever kind it is
          schema: original.schema as any,
        },
      ) as unknown as StructuredToolInterface,
  );
}
