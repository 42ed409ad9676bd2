/** The few shapes of the OpenAI wire format the middleware reads; no runtime `openai` import. */

export interface ChatMessageParam {
  role: string;
  content?: unknown;
  [key: string]: unknown;
}

export interface ChatCompletionParams {
  messages: ChatMessageParam[];
  stream?: boolean | null;
  [key: string]: unknown;
}

export interface ChatCompletion {
  choices: { message?: { content?: string | null }; finish_reason?: string | null }[];
}

export interface ChatCompletionChunk {
  choices: { delta?: { content?: string | null }; finish_reason?: string | null }[];
}

export interface ResponseParams {
  input?: string | unknown[];
  stream?: boolean | null;
  [key: string]: unknown;
}

export interface ResponseObject {
  output?: { type: string; content?: { type: string; text?: string }[] }[];
  output_text?: string;
}

export interface ResponseStreamEvent {
  type: string;
  delta?: string;
  response?: ResponseObject;
}

/** The text of a content field: a string, or the text parts of an array. */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .flatMap((part) =>
      typeof part === "object" && part !== null && typeof (part as { text?: unknown }).text === "string"
        ? [(part as { text: string }).text]
        : [],
    )
    .join("\n");
}
