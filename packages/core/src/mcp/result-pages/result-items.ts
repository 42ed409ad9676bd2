/**
 * A tool result as the items a model reads, and pages of them: text (a text block, or an embedded text
 * resource) may be cut; an image, audio or blob is whole or absent, and counts a fixed number of
 * tokens instead of its base64.
 */
import { isDeepStrictEqual } from "node:util";
import type { CallToolResult } from "@modelcontextprotocol/server";
import { countTokens, fitsTokens, tokensOf } from "../../tokens/count-tokens.ts";
import { cutText } from "./cut-text.ts";
import { createTextScan, type TextScan } from "./text-scan.ts";

export type ResultItem = CallToolResult["content"][number];

/** What an image, audio or blob block counts: the order of what current models charge for a 1024-pixel image. */
export const mediaTokens = 1_000;

/** Where a page starts: an item, and a character offset in it when it is text. */
export interface Position {
  readonly item: number;
  readonly offset: number;
}

/**
 * The items of a result: its content blocks, and its structured content as JSON text when no text
 * block already carries it (a client may hand the model either). A text block carries it when it is
 * the same JSON value, however spaced (a Python server writes `", "` between members).
 */
export function resultItems(result: CallToolResult): ResultItem[] {
  const items = [...result.content];
  const structured = result.structuredContent;
  if (structured !== undefined) {
    const json = JSON.stringify(structured);
    const carried = items.some(
      (item) => item.type === "text" && (item.text === json || sameJson(item.text, structured)),
    );
    if (!carried) items.push({ type: "text", text: json });
  }
  return items;
}

function sameJson(text: string, value: unknown): boolean {
  const first = text.trimStart()[0];
  if (first !== "{" && first !== "[") return false;
  try {
    return isDeepStrictEqual(JSON.parse(text), value);
  } catch {
    return false;
  }
}

/** Whether the result as a model reads it (its content, or its structured content) fits `budget` tokens. */
export function resultFits(result: CallToolResult, budget: number): boolean {
  const structured =
    result.structuredContent === undefined ? undefined : JSON.stringify(result.structuredContent);
  if (fitsByBytes(result.content, structured, budget)) return true;
  let left = budget;
  for (const item of result.content) {
    const text = textOf(item);
    if (text === undefined) left -= atomicTokens(item);
    else {
      if (!fitsTokens(text, left)) return false;
      left -= countTokens(text);
    }
    if (left < 0) return false;
  }
  return structured === undefined || fitsTokens(structured, budget);
}

/**
 * A token is at least one UTF-8 byte: a small answer fits without a count, so the common call never
 * pays for one (nor loads the tokenizer's tables).
 */
function fitsByBytes(items: readonly ResultItem[], structured: string | undefined, budget: number): boolean {
  if (structured !== undefined && (structured.length > budget || Buffer.byteLength(structured) > budget)) {
    return false;
  }
  let bytes = 0;
  for (const item of items) {
    const text = textOf(item);
    if (text === undefined) {
      bytes += isMedia(item) ? mediaTokens : Buffer.byteLength(JSON.stringify(item));
    } else {
      if (text.length > budget) return false;
      bytes += Buffer.byteLength(text);
    }
    if (bytes > budget) return false;
  }
  return true;
}

/** The text of an item that may be cut, or undefined for one that is whole or absent. */
export function textOf(item: ResultItem): string | undefined {
  if (item.type === "text") return item.text;
  if (item.type === "resource" && "text" in item.resource) return item.resource.text;
  return undefined;
}

function withText(item: ResultItem, text: string): ResultItem {
  if (item.type === "text") return item.text === text ? item : { ...item, text };
  if (item.type === "resource" && "text" in item.resource) {
    return item.resource.text === text ? item : { ...item, resource: { ...item.resource, text } };
  }
  return item;
}

function atomicTokens(item: ResultItem): number {
  return isMedia(item) ? mediaTokens : tokensOf(item);
}

/** An image, audio or a blob resource (a text resource is text). */
function isMedia(item: ResultItem): boolean {
  return item.type === "image" || item.type === "audio" || item.type === "resource";
}

/** The tokens of items as a model reads them. */
export function itemsTokens(items: readonly ResultItem[]): number {
  let total = 0;
  for (const item of items) {
    const text = textOf(item);
    total += text === undefined ? atomicTokens(item) : countTokens(text);
  }
  return total;
}

export interface Page {
  readonly items: ResultItem[];
  readonly tokens: number;
  /** Where the next page starts; undefined when this one reaches the end. */
  readonly next: Position | undefined;
}

/** What the cuts of a result's text items learnt, by item: a kept answer keeps them for its next pages (ADR 0558). */
export type TextScans = Map<number, TextScan>;

/**
 * The items from `start` that fit `limit` tokens, cut at a sensible boundary, and never empty: an item
 * alone larger than the limit is still answered whole (an image), or by its first characters (text).
 */
export function takePage(
  items: readonly ResultItem[],
  start: Position,
  limit: number,
  scans: TextScans = new Map(),
): Page {
  const taken: ResultItem[] = [];
  let used = 0;
  let position = start;
  while (position.item < items.length) {
    const item = items[position.item] as ResultItem;
    const text = textOf(item);
    const next = { item: position.item + 1, offset: 0 };
    if (text === undefined) {
      const cost = atomicTokens(item);
      if (taken.length > 0 && used + cost > limit) break;
      taken.push(item);
      used += cost;
      position = next;
      continue;
    }
    const left = limit - used;
    const rest = position.offset === 0 ? text : text.slice(position.offset);
    if (fitsTokens(rest, left)) {
      taken.push(withText(item, rest));
      used += countTokens(rest);
      position = next;
      continue;
    }
    // A sliver of text at the end of a page helps nobody: the item starts the next page instead.
    if (taken.length > 0 && left < limit / 4) break;
    let scan = scans.get(position.item);
    if (scan === undefined) {
      scan = createTextScan(text);
      scans.set(position.item, scan);
    }
    let end = cutText(text, position.offset, left, scan);
    if (end === position.offset) {
      if (taken.length > 0) break;
      end = position.offset + (isHighSurrogate(text.charCodeAt(position.offset)) ? 2 : 1);
    }
    const piece = text.slice(position.offset, end);
    taken.push(withText(item, piece));
    used += countTokens(piece);
    position = end >= text.length ? next : { item: position.item, offset: end };
    break;
  }
  return { items: taken, tokens: used, next: position.item < items.length ? position : undefined };
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
