/**
 * The conversations of a ChatGPT or Claude data export (`conversations.json`), as the export writes
 * them, for the import formats `chatgpt-export` and `claude-export` (ADR 0543). Fields the import does
 * not read are kept as sent; a ChatGPT conversation's shown branch is checked here, so a loop in its
 * parent links or a `current_node` missing from its mapping is refused before a job is stored.
 */
import { z } from "zod";
import { idSchema } from "./common.ts";

const chatgptPartSchema = z.union([
  z.string(),
  z.looseObject({ content_type: z.string().optional(), text: z.string().optional() }),
  z.null(),
]);

export const chatgptMessageSchema = z.looseObject({
  id: z.string().optional(),
  author: z.looseObject({ role: z.string().min(1).max(40), name: z.string().nullish() }),
  content: z.looseObject({
    content_type: z.string(),
    parts: z.array(chatgptPartSchema).optional(),
    text: z.string().optional(),
    language: z.string().nullish(),
  }),
  create_time: z.number().nullish(),
  recipient: z.string().nullish(),
  metadata: z.looseObject({ is_visually_hidden_from_conversation: z.boolean().nullish() }).nullish(),
});
export type ChatgptExportMessage = z.output<typeof chatgptMessageSchema>;

export const chatgptNodeSchema = z.looseObject({
  id: z.string().optional(),
  message: chatgptMessageSchema.nullish(),
  parent: z.string().nullish(),
  children: z.array(z.string()).optional(),
});
export type ChatgptExportNode = z.output<typeof chatgptNodeSchema>;

interface ChatgptTree {
  readonly mapping: Readonly<Record<string, ChatgptExportNode>>;
  readonly current_node: string;
}

/**
 * The conversation ChatGPT shows: the nodes from `current_node` up its `parent` links to the root,
 * oldest first, with their mapping keys (edited and regenerated branches are not on it). Walked in a
 * loop over a set of the nodes seen, so a deep tree cannot overflow the stack and a loop ends; a loop
 * or a link to a node the mapping lacks is a problem, not a shorter branch.
 */
export function chatgptShownBranch(
  conversation: ChatgptTree,
): { branch: { key: string; node: ChatgptExportNode }[] } | { problem: string } {
  const { mapping } = conversation;
  const seen = new Set<string>();
  const branch: { key: string; node: ChatgptExportNode }[] = [];
  let key: string | null | undefined = conversation.current_node;
  while (key !== null && key !== undefined) {
    if (!Object.hasOwn(mapping, key)) {
      const previous = branch.at(-1);
      return {
        problem:
          previous === undefined
            ? `its current_node "${key}" is not in its mapping`
            : `node "${previous.key}" names a parent "${key}" that is not in its mapping`,
      };
    }
    if (seen.has(key)) return { problem: `its parent links loop back to node "${key}"` };
    seen.add(key);
    const node = mapping[key] as ChatgptExportNode;
    branch.push({ key, node });
    key = node.parent;
  }
  return { branch: branch.reverse() };
}

/** The id a ChatGPT conversation is imported under: `id`, or `conversation_id` in older exports. */
export function chatgptConversationId(conversation: {
  id?: string | undefined;
  conversation_id?: string | undefined;
}): string | undefined {
  return conversation.id ?? conversation.conversation_id;
}

export const chatgptConversationSchema = z
  .looseObject({
    id: idSchema.optional(),
    conversation_id: idSchema.optional(),
    title: z.string().nullish(),
    create_time: z.number().nullish(),
    update_time: z.number().nullish(),
    mapping: z.record(z.string(), chatgptNodeSchema),
    current_node: z.string().min(1),
  })
  .superRefine((conversation, context) => {
    const id = chatgptConversationId(conversation);
    if (id === undefined) {
      context.addIssue({ code: "custom", message: "a ChatGPT conversation needs its id or conversation_id" });
      return;
    }
    const walked = chatgptShownBranch(conversation);
    if ("problem" in walked) {
      context.addIssue({ code: "custom", message: `conversation "${id}": ${walked.problem}` });
    }
  });
export type ChatgptExportConversation = z.input<typeof chatgptConversationSchema>;

export const claudeMessageSchema = z.looseObject({
  uuid: z.string().optional(),
  sender: z.string().min(1).max(40),
  text: z.string().nullish(),
  content: z.array(z.looseObject({ type: z.string(), text: z.string().nullish() })).nullish(),
  created_at: z.string().nullish(),
});
export type ClaudeExportMessage = z.output<typeof claudeMessageSchema>;

export const claudeConversationSchema = z.looseObject({
  uuid: idSchema,
  name: z.string().nullish(),
  created_at: z.string().nullish(),
  updated_at: z.string().nullish(),
  chat_messages: z.array(claudeMessageSchema).max(5000),
});
export type ClaudeExportConversation = z.input<typeof claudeConversationSchema>;
