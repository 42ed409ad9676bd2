/** `writeTools`: add a memory, append a conversation event, edit core memory blocks. */
import { defineTool } from "@tackle/core";
import { selfEditRequestSchema } from "../schemas/core-memory.ts";
import { writeEventRequestSchema } from "../schemas/event.ts";
import { addMemoryRequestSchema } from "../schemas/memory.ts";
import { bindIdentity } from "./bind-identity.ts";
import type { MemoryToolClient } from "./memory-tool-client.ts";

export function writeTools(client: MemoryToolClient) {
  return [
    defineTool({
      name: "memory_add",
      description:
        "Store a fact, preference, episode or procedure. An exact or near duplicate in the same scope is not stored twice; the answer names the memory that holds it.",
      input: addMemoryRequestSchema,
      annotations: { title: "Add memory", readOnlyHint: false, idempotentHint: true, openWorldHint: false },
      execute: (input, context) => client.add(bindIdentity(input, context), { signal: context.signal }),
    }),
    defineTool({
      name: "memory_write_event",
      description:
        "Append one conversation turn (user, assistant, system or tool). User turns are mined for first-person facts unless infer is false.",
      input: writeEventRequestSchema,
      annotations: { title: "Write event", readOnlyHint: false, idempotentHint: true, openWorldHint: false },
      // A retried tool call carries the same idempotency key, so the service stores the turn once.
      execute: (input, context) =>
        client.writeEvent(
          {
            ...bindIdentity(input, context),
            customId: input.customId ?? context.idempotencyKey.slice(0, 200),
          },
          { signal: context.signal },
        ),
    }),
    defineTool({
      name: "memory_self_edit",
      description:
        "Read or edit your core memory blocks (persona, human, or blocks you create): append, replace exact text, rewrite, create. Edits apply in order, all or nothing; an empty list reads the blocks.",
      input: selfEditRequestSchema,
      annotations: { title: "Edit core memory", readOnlyHint: false, openWorldHint: false },
      execute: (input, context) => client.selfEdit(bindIdentity(input, context), { signal: context.signal }),
    }),
  ];
}
