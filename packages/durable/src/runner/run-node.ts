/** Runs one node until it returns, throws or pauses; a pause wins even over code that swallows the interrupt. */
import { isControlFlow, ToolError } from "@tackle/core";
import type { NodeRuntime } from "./node-context.ts";

export type NodeOutcome<State> =
  | { kind: "done"; update: Partial<State> | undefined }
  | { kind: "paused" }
  | { kind: "failed"; error: unknown };

export async function runNode<State>(
  fn: (state: Readonly<State>, ctx: NodeRuntime["context"]) => unknown,
  state: State,
  runtime: NodeRuntime,
): Promise<
  | { kind: "done"; update: Partial<State> | undefined }
  | { kind: "paused" }
  | { kind: "failed"; error: unknown }
> {
  const ran = (async () => fn(state, runtime.context))();
  // Some layers swallow a thrown interrupt (a model SDK turning it into a tool error): the pause wins anyway.
  const settled = await Promise.race([
    ran.then(
      (update) => ({ kind: "returned" as const, update }),
      (error: unknown) => ({ kind: "threw" as const, error }),
    ),
    runtime.paused.then(() => ({ kind: "pause" as const })),
  ]);
  await runtime.settle();
  if (runtime.isPaused) {
    ran.catch(() => {});
    return { kind: "paused" };
  }
  if (settled.kind === "threw") {
    if (isControlFlow(settled.error)) return { kind: "paused" };
    return { kind: "failed", error: settled.error };
  }
  if (settled.kind === "pause") return { kind: "paused" };
  const update = settled.update;
  if (update !== undefined && (typeof update !== "object" || update === null || Array.isArray(update))) {
    return {
      kind: "failed",
      error: new ToolError("invalid_update", "A node must return an object of state fields (or nothing)"),
    };
  }
  return { kind: "done", update: update as Partial<State> | undefined };
}
