/**
 * Tool results beyond JSON: MCP content blocks (text, image, audio, resource links, embedded
 * resources). A tool returns `toolContent([...])`; MCP servers send the blocks as they are, and a
 * result that came from an MCP server (a stdio child) keeps its blocks through every hop. The marker
 * is a plain string key, so the value survives JSON on any wire.
 */

/** A text block. */
export interface TextBlock {
  readonly type: "text";
  readonly text: string;
  readonly [key: string]: unknown;
}

/** Base64 image or audio data with its MIME type. */
export interface MediaBlock {
  readonly type: "image" | "audio";
  readonly data: string;
  readonly mimeType: string;
  readonly [key: string]: unknown;
}

/** A link to a resource the client may fetch. */
export interface ResourceLinkBlock {
  readonly type: "resource_link";
  readonly uri: string;
  readonly name: string;
  readonly mimeType?: string;
  readonly [key: string]: unknown;
}

/** A resource embedded in the result: text or a base64 blob. */
export interface EmbeddedResourceBlock {
  readonly type: "resource";
  readonly resource:
    | { readonly uri: string; readonly mimeType?: string; readonly text: string }
    | { readonly uri: string; readonly mimeType?: string; readonly blob: string };
  readonly [key: string]: unknown;
}

export type ContentBlock = TextBlock | MediaBlock | ResourceLinkBlock | EmbeddedResourceBlock;

/** The key that marks a tool output as content blocks rather than a JSON value. */
export const toolContentKey = "~tackle/content";

export interface ToolContent {
  readonly [toolContentKey]: true;
  readonly content: readonly ContentBlock[];
  /** A JSON object beside the blocks, for clients that read structured results. */
  readonly structuredContent?: Record<string, unknown>;
}

/** A tool output made of content blocks (and, optionally, a structured object beside them). */
export function toolContent(
  content: readonly ContentBlock[],
  options: { readonly structuredContent?: Record<string, unknown> } = {},
): ToolContent {
  return {
    [toolContentKey]: true,
    content: [...content],
    ...(options.structuredContent === undefined ? {} : { structuredContent: options.structuredContent }),
  };
}

/** True for a `toolContent(...)` value, including one that crossed a wire as JSON. */
export function isToolContent(value: unknown): value is ToolContent {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as Record<string, unknown>)[toolContentKey] === true &&
    Array.isArray((value as { content?: unknown }).content)
  );
}
