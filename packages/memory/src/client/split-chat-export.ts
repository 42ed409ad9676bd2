/**
 * A ChatGPT or Claude export's `conversations.json` cut into imports that each fit `IMPORT_LIMITS`
 * and a 4 MiB body (ADR 0543): each conversation cut down to the fields the import reads (a ChatGPT
 * conversation to its shown branch), packed in order, and a conversation too large for one import
 * cut between its messages. Its turns' ids name the conversation and message, not the part, so the
 * parts store what one import would, and importing the file again stores nothing new.
 */
import type { z } from "zod";
import { MemoryError } from "../errors/memory-error.ts";
import { IMPORT_LIMITS } from "../schemas/admin.ts";
import {
  type ChatgptExportNode,
  chatgptConversationId,
  chatgptConversationSchema,
  chatgptShownBranch,
  claudeConversationSchema,
} from "../schemas/chat-exports.ts";

export type ChatExportFormat = "chatgpt-export" | "claude-export";

/** What one import carries at most, below `IMPORT_LIMITS`: room for the request's other fields. */
const budget = {
  bytes: IMPORT_LIMITS.bytes - 65_536,
  entries: IMPORT_LIMITS.entries - 1_000,
  conversations: 500,
};

interface Sized {
  readonly value: unknown;
  readonly bytes: number;
  readonly entries: number;
}

function sized(value: unknown): Sized {
  let entries = 0;
  const pending = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (item === null || typeof item !== "object") continue;
    const children = Array.isArray(item) ? item : Object.values(item);
    entries += children.length;
    pending.push(...children);
  }
  return { value, bytes: Buffer.byteLength(JSON.stringify(value)), entries };
}

function refuse(message: string): never {
  throw new MemoryError("invalid_input", message, 400);
}

function slimChatgptNode(node: ChatgptExportNode, parent: string | null) {
  const { message } = node;
  if (message === null || message === undefined) return { parent, message: null };
  const { content } = message;
  const parts = content.parts?.flatMap((part): unknown[] =>
    typeof part === "string"
      ? [part]
      : typeof part?.text === "string"
        ? [{ content_type: part.content_type, text: part.text }]
        : [],
  );
  return {
    parent,
    message: {
      author: { role: message.author.role, ...(message.author.name ? { name: message.author.name } : {}) },
      content: {
        content_type: content.content_type,
        ...(parts === undefined ? {} : { parts }),
        ...(content.text === undefined ? {} : { text: content.text }),
        ...(content.language ? { language: content.language } : {}),
      },
      ...(typeof message.create_time === "number" ? { create_time: message.create_time } : {}),
      ...(message.metadata?.is_visually_hidden_from_conversation === true
        ? { metadata: { is_visually_hidden_from_conversation: true } }
        : {}),
    },
  };
}

/** A ChatGPT conversation's shown branch, in pieces of consecutive nodes that each fit an import. */
function chatgptPieces(conversation: z.output<typeof chatgptConversationSchema>): Sized[] {
  const id = chatgptConversationId(conversation) as string;
  const walked = chatgptShownBranch(conversation);
  if ("problem" in walked) return refuse(`conversation "${id}": ${walked.problem}`);
  const head = {
    id,
    ...(conversation.title ? { title: conversation.title } : {}),
    ...(typeof conversation.create_time === "number" ? { create_time: conversation.create_time } : {}),
  };
  const nodes = walked.branch.map(({ key, node }, index) => ({
    key,
    ...sized(slimChatgptNode(node, walked.branch[index - 1]?.key ?? null)),
  }));
  // A piece's first node has no parent: its branch starts there, and its turns keep their node ids.
  const piece = (chunk: typeof nodes) =>
    sized({
      ...head,
      current_node: chunk.at(-1)?.key ?? "",
      mapping: Object.fromEntries(
        chunk.map((node, index) => [
          node.key,
          index === 0 ? { ...(node.value as object), parent: null } : node.value,
        ]),
      ),
    });
  return cut(nodes, piece, (node) => `conversation "${id}": node "${node.key}"`);
}

function claudePieces(conversation: z.output<typeof claudeConversationSchema>): Sized[] {
  const id = conversation.uuid;
  const messages = conversation.chat_messages.map((message, index) => {
    const blocks = (message.content ?? []).filter(
      (block) => block.type === "text" && typeof block.text === "string" && block.text.trim() !== "",
    );
    return {
      key: message.uuid ?? `#${index}`,
      ...sized({
        ...(message.uuid === undefined ? {} : { uuid: message.uuid }),
        sender: message.sender,
        ...(message.created_at ? { created_at: message.created_at } : {}),
        ...(blocks.length > 0
          ? { content: blocks.map((block) => ({ type: "text", text: block.text })) }
          : { text: message.text ?? "" }),
      }),
    };
  });
  const head = { uuid: id, ...(conversation.name ? { name: conversation.name } : {}) };
  const piece = (chunk: typeof messages) => sized({ ...head, chat_messages: chunk.map((m) => m.value) });
  const pieces = cut(messages, piece, (message) => `conversation "${id}": message "${message.key}"`);
  // Without message ids, turns are named by their place, which a cut would move.
  if (pieces.length > 1 && conversation.chat_messages.some((message) => message.uuid === undefined))
    refuse(`conversation "${id}" is too large for one import and its messages have no uuid to keep it whole`);
  return pieces;
}

/** `units` in consecutive runs whose pieces each fit the budget; a unit too large alone is refused. */
function cut<T extends Sized>(units: T[], piece: (chunk: T[]) => Sized, name: (unit: T) => string): Sized[] {
  const whole = piece(units);
  if (whole.bytes <= budget.bytes && whole.entries <= budget.entries) return [whole];
  const pieces: Sized[] = [];
  let chunk: T[] = [];
  let bytes = 0;
  let entries = 0;
  for (const unit of units) {
    // The unit's JSON, its key and punctuation, and the piece's own fields (bounded by 1 KiB here).
    const unitBytes = unit.bytes + Buffer.byteLength(name(unit)) + 8;
    if (unitBytes + 1_024 > budget.bytes || unit.entries + 16 > budget.entries) {
      refuse(`${name(unit)} alone holds ${unit.bytes} bytes, more than one import carries`);
    }
    if (
      chunk.length > 0 &&
      (bytes + unitBytes + 1_024 > budget.bytes || entries + unit.entries + 16 > budget.entries)
    ) {
      pieces.push(piece(chunk));
      chunk = [];
      bytes = 0;
      entries = 0;
    }
    chunk.push(unit);
    bytes += unitBytes;
    entries += unit.entries + 2;
  }
  if (chunk.length > 0) pieces.push(piece(chunk));
  return pieces;
}

function checked<S extends z.ZodType>(schema: S, conversation: unknown, index: number): z.output<S> {
  const result = schema.safeParse(conversation);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const path = issue.path.filter((key) => typeof key !== "symbol").join(".");
    return `${path === "" ? "" : `${path}: `}${issue.message}`;
  });
  return refuse(`the export's conversation ${index}: ${problems.join("; ")}`);
}

function conversationsOf(exported: unknown): unknown[] {
  let value = exported;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch (error) {
      throw new MemoryError("invalid_input", "the export is not JSON", 400, { cause: error });
    }
  }
  if (Array.isArray(value)) return value;
  const listed = (value as { conversations?: unknown } | null)?.conversations;
  if (Array.isArray(listed)) return listed;
  return refuse("an export is a conversations.json: an array of conversations");
}

/**
 * The conversations of an export (its `conversations.json` as text, or parsed) as the `conversations`
 * of one or more imports of `format`, in the file's order; each conversation checked as the import
 * checks it, so a bad one is refused naming it before any import starts.
 */
export function splitChatExport(format: ChatExportFormat, exported: unknown): unknown[][] {
  const pieces: Sized[] = [];
  for (const [index, conversation] of conversationsOf(exported).entries()) {
    if (format === "chatgpt-export") {
      pieces.push(...chatgptPieces(checked(chatgptConversationSchema, conversation, index)));
    } else {
      pieces.push(...claudePieces(checked(claudeConversationSchema, conversation, index)));
    }
  }
  const parts: unknown[][] = [];
  let part: unknown[] = [];
  let bytes = 2;
  let entries = 0;
  for (const piece of pieces) {
    const full =
      part.length >= budget.conversations ||
      bytes + piece.bytes + 1 > budget.bytes ||
      entries + piece.entries + 1 > budget.entries;
    if (part.length > 0 && full) {
      parts.push(part);
      part = [];
      bytes = 2;
      entries = 0;
    }
    part.push(piece.value);
    bytes += piece.bytes + 1;
    entries += piece.entries + 1;
  }
  if (part.length > 0) parts.push(part);
  return parts;
}
