/**
 * The call options of a tool's write: an idempotency key of the tool call, so a retried call (a mesh
 * retry, a durable re-run: the same key) is answered by the service instead of written again.
 */
import { createHash } from "node:crypto";
import type { ToolContext } from "@tackle/core";
import { byIdOptions } from "./bind-identity.ts";

/** Per tool and call key, hashed: the service accepts 1 to 200 visible ASCII characters; a caller's key may be anything. */
function toolCallKey(toolName: string, context: ToolContext): string {
  return createHash("sha256").update(`${toolName}\u0000${context.idempotencyKey}`).digest("hex");
}

export function writeOptions(
  toolName: string,
  context: ToolContext,
): { signal?: AbortSignal; idempotencyKey: string } {
  return {
    ...(context.signal === undefined ? {} : { signal: context.signal }),
    idempotencyKey: toolCallKey(toolName, context),
  };
}

/** `writeOptions` for an operation on one memory by id, narrowed to the context's identity. */
export function byIdWriteOptions(toolName: string, context: ToolContext) {
  return { ...byIdOptions(context), idempotencyKey: toolCallKey(toolName, context) };
}
