/**
 * An import's conversations as turns to store, whatever their format: an API transcript's messages in
 * order, a ChatGPT export's shown branch, a Claude export's chat messages (ADR 0543).
 */
import { createHash } from "node:crypto";
import type { z } from "zod";
import { MemoryError } from "../../errors/memory-error.ts";
import type {
  importConversationsRequestSchema,
  importTranscriptsRequestSchema,
} from "../../schemas/admin.ts";
import {
  type ChatgptExportConversation,
  type ChatgptExportMessage,
  type ClaudeExportConversation,
  type ClaudeExportMessage,
  chatgptConversationId,
  chatgptShownBranch,
} from "../../schemas/chat-exports.ts";

type ImportInput = z.output<typeof importConversationsRequestSchema>;
type Content = z.output<typeof importTranscriptsRequestSchema>["conversations"][number]["system"];

export interface ImportTurn {
  readonly role: string;
  readonly text: string;
  /** What names the turn in its conversation, for its custom id: its index, or an export's message id. */
  readonly key: string;
  readonly speaker?: string;
  readonly at?: string;
}

export interface ImportConversation {
  /** The conversation's id as sent, or its index in the import. */
  readonly label: string | number;
  /** What names the conversation in its turns' custom ids: its id, or a digest of its messages. */
  readonly key: string;
  /** The session its turns go to: the one it names, else the import's, else `import:<defaultSession>`. */
  readonly sessionId?: string;
  readonly defaultSession: string;
  readonly turns: readonly ImportTurn[];
}

export function digest(...parts: string[]): string {
  return createHash("sha256").update(parts.join("\u0000")).digest("hex").slice(0, 40);
}

/** The text of a message's content: a string, or the text parts of a content array. */
export function contentText(content: Content): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  return content
    .map((part) => (typeof part.text === "string" ? part.text : ""))
    .filter((text) => text.length > 0)
    .join("\n");
}

/**
 * When a message was said, if it says: `created_at`, `createdAt` or `timestamp` as an ISO date or as
 * Unix seconds (ChatGPT's export writes `create_time` in seconds). Anything else is ignored.
 */
export function messageTime(message: Record<string, unknown>): string | undefined {
  for (const field of ["created_at", "createdAt", "timestamp", "create_time"]) {
    const value = message[field];
    const at =
      typeof value === "number" && Number.isFinite(value)
        ? value * 1000
        : typeof value === "string" && /^\d{4}-\d{2}-\d{2}/.test(value)
          ? Date.parse(value)
          : Number.NaN;
    if (Number.isFinite(at) && at > 0 && at < 8.64e15) return new Date(at).toISOString();
  }
  return undefined;
}

function named(name: unknown): { speaker?: string } {
  return typeof name === "string" && name.trim() !== "" ? { speaker: name } : {};
}

function timed(message: Record<string, unknown>): { at?: string } {
  const at = messageTime(message);
  return at === undefined ? {} : { at };
}

/**
 * The text ChatGPT shows for a message: text parts (an image's part has none, a voice part its
 * transcript), code as a fenced block, a quote's text. Reasoning, tool output, browsing displays and
 * custom instructions have content types of their own and give none.
 */
export function chatgptMessageText(message: ChatgptExportMessage): string {
  const { content } = message;
  switch (content.content_type) {
    case "text":
    case "multimodal_text":
      return (content.parts ?? [])
        .map((part) => (typeof part === "string" ? part : typeof part?.text === "string" ? part.text : ""))
        .filter((text) => text.trim().length > 0)
        .join("\n");
    case "code": {
      if (typeof content.text !== "string" || content.text.trim() === "") return "";
      const language = content.language && content.language !== "unknown" ? content.language : "";
      return `\`\`\`${language}\n${content.text}\n\`\`\``;
    }
    case "tether_quote":
      return typeof content.text === "string" ? content.text : "";
    default:
      return "";
  }
}

/**
 * A ChatGPT conversation's shown turns. Only a user's or the assistant's visible messages become
 * turns: a hidden one (ChatGPT's own system prompt, custom instructions), a system or a tool message
 * becomes a turn of role `skipped`, counted as skipped.
 */
function chatgptTurns(conversation: ChatgptExportConversation): ImportTurn[] {
  const walked = chatgptShownBranch(conversation);
  if ("problem" in walked) {
    // The request was checked when the job was stored; a job input that fails is refused, not guessed.
    throw new MemoryError(
      "invalid_input",
      `conversation "${chatgptConversationId(conversation)}": ${walked.problem}`,
      400,
    );
  }
  const turns: ImportTurn[] = [];
  for (const { key, node } of walked.branch) {
    const { message } = node;
    if (message === null || message === undefined) continue;
    const role = message.author.role.toLowerCase();
    const shown =
      (role === "user" || role === "assistant") &&
      message.metadata?.is_visually_hidden_from_conversation !== true;
    turns.push({
      role: shown ? role : "skipped",
      text: shown ? chatgptMessageText(message) : "",
      key: `node:${key}`,
      ...named(message.author.name),
      ...timed(message),
    });
  }
  return turns;
}

/** A Claude message's text: its content's text blocks (not thinking or tool blocks), else `text`. */
export function claudeMessageText(message: ClaudeExportMessage): string {
  const blocks = (message.content ?? [])
    .filter((block) => block.type === "text" && typeof block.text === "string" && block.text.trim() !== "")
    .map((block) => block.text as string);
  if (blocks.length > 0) return blocks.join("\n\n");
  return typeof message.text === "string" ? message.text : "";
}

function claudeTurns(conversation: ClaudeExportConversation): ImportTurn[] {
  return conversation.chat_messages.map((message, index) => ({
    role: message.sender,
    text: claudeMessageText(message),
    key: message.uuid === undefined ? String(index) : `message:${message.uuid}`,
    ...timed(message),
  }));
}

/** Each conversation of an import, with the turns it holds in the order they were said. */
export function importConversations(input: ImportInput): ImportConversation[] {
  switch (input.format) {
    case "chatgpt-export":
      return input.conversations.map((conversation) => {
        const id = chatgptConversationId(conversation) as string;
        return { label: id, key: id, defaultSession: id, turns: chatgptTurns(conversation) };
      });
    case "claude-export":
      return input.conversations.map((conversation) => ({
        label: conversation.uuid,
        key: conversation.uuid,
        defaultSession: conversation.uuid,
        turns: claudeTurns(conversation),
      }));
    default:
      return input.conversations.map((conversation, index) => {
        const turns: ImportTurn[] = [];
        if (input.format === "anthropic" && conversation.system !== undefined) {
          turns.push({ role: "system", text: contentText(conversation.system), key: "" });
        }
        for (const message of conversation.messages) {
          turns.push({
            role: message.role,
            text: contentText(message.content),
            key: "",
            ...named(message.name),
            ...timed(message),
          });
        }
        const fingerprint = digest(JSON.stringify(conversation.messages));
        return {
          label: conversation.id ?? index,
          // A transcript's turns are named by their index (as before exports), so ids stay as they were.
          key: conversation.id ?? fingerprint,
          defaultSession: conversation.id ?? fingerprint.slice(0, 16),
          ...(conversation.sessionId === undefined ? {} : { sessionId: conversation.sessionId }),
          turns: turns.map((turn, position) => ({ ...turn, key: String(position) })),
        };
      });
  }
}
