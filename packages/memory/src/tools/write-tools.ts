/** `writeTools`: add a memory, append a conversation event, edit core memory blocks. */
import { defineTool } from "@tackle/core";
import { selfEditRequestSchema } from "../schemas/core-memory.ts";
import { writeEventRequestSchema } from "../schemas/event.ts";
import { addMemoryRequestSchema } from "../schemas/memory.ts";
import { bindIdentity } from "./bind-identity.ts";
import { compactMemory } from "./compact-results.ts";
import type { MemoryToolClient } from "./memory-tool-client.ts";
import { modelSchema } from "./model-schema.ts";
import { writeOptions } from "./write-options.ts";

export function writeTools(client: MemoryToolClient) {
  return [
    defineTool({
      name: "memory_add",
      description:
        "Store a fact, preference, episode or procedure; a near duplicate in the scope is not stored twice, the answer names the memory holding it.",
      input: modelSchema(addMemoryRequestSchema),
      annotations: { title: "Add memory", readOnlyHint: false, idempotentHint: true, openWorldHint: false },
      execute: async (input, context) => {
        // A model that repeats a call means the same memory, an episode too: the tool dedupes by default
        // (the API keeps every episode, since a repeated turn of a conversation is a new one).
        const answer = await client.add(
          { ...bindIdentity(input, context), dedupe: input.dedupe ?? true },
          writeOptions("memory_add", context),
        );
        return {
          ...compactMemory(answer.memory),
          created: answer.created,
          ...(answer.duplicateOf === undefined ? {} : { duplicateOf: answer.duplicateOf }),
        };
      },
    }),
    defineTool({
      name: "memory_write_event",
      description:
        "Append one conversation turn (user, assistant, system, tool); user turns are mined for first-person facts unless infer is false.",
      input: modelSchema(writeEventRequestSchema),
      annotations: { title: "Write event", readOnlyHint: false, idempotentHint: true, openWorldHint: false },
      // A retried tool call carries the same idempotency key: the service answers the first write, and
      // the custom id keeps the turn single after that key expired.
      execute: async (input, context) => {
        const answer = await client.writeEvent(
          {
            ...bindIdentity(input, context),
            customId: input.customId ?? context.idempotencyKey.slice(0, 200),
          },
          writeOptions("memory_write_event", context),
        );
        return {
          id: answer.event.id,
          created: answer.created,
          memories: answer.memories.map((memory) => compactMemory(memory)),
        };
      },
    }),
    defineTool({
      name: "memory_self_edit",
      description:
        "Read or edit your core memory blocks (persona, human, your own): append, replace exact text, rewrite, create; in order, all or nothing. No edits: read them.",
      input: modelSchema(selfEditRequestSchema),
      annotations: { title: "Edit core memory", readOnlyHint: false, openWorldHint: false },
      execute: (input, context) =>
        client.selfEdit(bindIdentity(input, context), writeOptions("memory_self_edit", context)),
    }),
  ];
}
