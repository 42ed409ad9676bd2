/**
 * `createResultPages`: the token budget of every tool answer a model reads over MCP. An answer past
 * the budget is cut at a sensible boundary and ends with a summary of what was left out and a cursor;
 * the paging tool answers the next part by that cursor, within the same budget. What was left out is
 * kept in memory, bounded (entries, bytes, time since last read), under a cursor that is random and
 * bound to the owner that received it (the console passes the caller's credential, not its session).
 */
import { randomBytes } from "node:crypto";
import type { CallToolResult, Tool as McpTool } from "@modelcontextprotocol/server";
import { ToolError } from "../../errors/tool-error.ts";
import { countTokens } from "../../tokens/count-tokens.ts";
import { toCallToolResult } from "../to-call-tool-result.ts";
import {
  declaredStructure,
  type FitOptions,
  type Reading,
  withDeclaredStructure,
  withheldErrorTokens,
  withheldNote,
} from "./declared-structure.ts";
import { createKeptResults, type KeptResults, type Totals } from "./kept-results.ts";
import {
  itemsTokens,
  type Page,
  type Position,
  type ResultItem,
  resultFits,
  resultItems,
  type TextScans,
  takePage,
  textOf,
} from "./result-items.ts";

export type { FitOptions } from "./declared-structure.ts";

export interface ResultPagesOptions {
  /** Tokens (o200k) of one tool answer, its summary included. Default 8,000; at least 1,500. */
  readonly budget?: number;
  /** Cut results kept at once; past it the least recently read goes. Default 256. */
  readonly maxEntries?: number;
  /** UTF-8 bytes of the cut results kept, all together. Default 64 MiB. */
  readonly maxBytes?: number;
  /** A kept result is dropped this long after it was last read. Default 15 minutes. */
  readonly ttlMs?: number;
  /** The paging tool's name, as answers spell it. Default `tackle.result_page`. */
  readonly toolName?: string;
}

export interface ResultPages {
  readonly budget: number;
  /** The paging tool, as `tools/list` lists it. */
  readonly tool: McpTool;
  /**
   * The result as it fits the budget: the same object when it does; else its first part, a summary
   * and a cursor. `options` says whether the tool declares an output schema (ADR 0542).
   */
  fit(result: CallToolResult, owner: string, options?: FitOptions): CallToolResult;
  /** The paging tool's answer to `{ cursor }` for `owner`: the next part, or a `not_found` error (resource `cursor`). */
  page(args: unknown, owner: string): CallToolResult;
  /** Drops what `owner` kept (its session closed). */
  forget(owner: string): void;
  /** What is kept now. */
  kept(): { readonly entries: number; readonly bytes: number };
}

export const defaultResultBudget = 8_000;
export const minimumResultBudget = 1_500;
/** Tokens held back for the summary line at the end of a cut answer. */
const summaryTokens = 250;

export function createResultPages(options: ResultPagesOptions = {}): ResultPages {
  const budget = options.budget ?? defaultResultBudget;
  if (!Number.isSafeInteger(budget) || budget < minimumResultBudget) {
    throw new ToolError(
      "invalid_result_budget",
      `The result budget must be a whole number of tokens, at least ${minimumResultBudget} (got ${budget})`,
      { data: { budget, minimum: minimumResultBudget } },
    );
  }
  const pager: Pager = {
    budget,
    limit: budget - summaryTokens,
    toolName: options.toolName ?? "tackle.result_page",
    store: createKeptResults({
      maxEntries: options.maxEntries ?? 256,
      maxBytes: options.maxBytes ?? 64 * 1024 * 1024,
      ttlMs: options.ttlMs ?? 15 * 60_000,
    }),
  };
  return {
    budget,
    tool: {
      name: pager.toolName,
      description: `Reads the next part of a tool answer that was cut to fit the answer budget (${budget} tokens). Pass the cursor the cut answer ended with; each part ends with the cursor of the next, until the last.`,
      inputSchema: {
        type: "object",
        properties: { cursor: { type: "string", description: "The cursor a cut answer ended with" } },
        required: ["cursor"],
        additionalProperties: false,
      },
      annotations: { readOnlyHint: true, idempotentHint: true },
    },
    fit: (result, owner, fitOptions) => fit(pager, result, owner, fitOptions),
    page: (args, owner) => page(pager, args, owner),
    forget: (owner) => pager.store.forget(owner),
    kept: () => pager.store.kept(),
  };
}

/** One budget's settings and its kept results, shared by `fit` and `page`. */
interface Pager {
  readonly budget: number;
  /** The budget less the summary's share. */
  readonly limit: number;
  readonly toolName: string;
  readonly store: KeptResults;
}

function fit(pager: Pager, result: CallToolResult, owner: string, options: FitOptions = {}): CallToolResult {
  const { budget, limit, toolName, store } = pager;
  if (resultFits(result, budget)) return result;
  const now = Date.now();
  store.sweep(now);
  const structure = declaredStructure(result, budget, options);
  const items = resultItems(result);
  const totals = totalsOf(items);
  // A withheld structure's error may be read beside the first part: both fit the budget together.
  const firstLimit = structure === "withheld" ? limit - withheldErrorTokens : limit;
  const scans: TextScans = new Map();
  const first = takePage(items, { item: 0, offset: 0 }, firstLimit, scans);
  const shown = describePart(items, { item: 0, offset: 0 }, first);
  const head = `[Answer cut to fit the budget of ${budget} tokens${structure === "withheld" ? withheldNote : ""}. The whole answer: ${count(totals.items, "item")}, ${count(totals.characters, "character")} of text, ${tokensOf(totals)} tokens. This part (1, ${first.tokens} tokens): ${shown}.`;
  const finish = (summary: string, meta: Record<string, unknown>, reading: Reading) =>
    withDeclaredStructure(answer(first, summary, meta, result), result, structure, {
      tool: options.tool ?? "tool",
      budget,
      totals,
      toolName,
      reading,
    });
  if (first.next === undefined) return finish(`${head}]`, { part: 1, complete: true }, { kind: "complete" });
  const bytes = sizeOf(items);
  const id = randomBytes(16).toString("base64url");
  if (
    !store.keep(id, {
      owner,
      items,
      bytes,
      totals,
      starts: [{ item: 0, offset: 0 }, first.next],
      scans,
      firstLimit,
      lastRead: now,
    })
  ) {
    return finish(
      `${head} Left out: ${leftOut(items, first.next)}; it is too large to keep for paging (${bytes} bytes, over ${store.maxBytes}): ask the tool for less.]`,
      { part: 1, complete: false, kept: false },
      { kind: "not_kept", bytes },
    );
  }
  const cursor = `${id}.1`;
  return finish(
    `${head} Left out: ${leftOut(items, first.next)}. Read the next part with ${toolName} {"cursor":"${cursor}"}.]`,
    { part: 1, cursor },
    { kind: "cursor", cursor: `${id}.0` },
  );
}

function page(pager: Pager, args: unknown, owner: string): CallToolResult {
  const { limit, toolName, store } = pager;
  const now = Date.now();
  store.sweep(now);
  const cursor = (args as { cursor?: unknown } | undefined)?.cursor;
  if (typeof cursor !== "string") {
    return toCallToolResult({
      ok: false,
      error: new ToolError(
        "invalid_input",
        `Invalid input for tool "${toolName}": cursor: a string is required`,
        {
          data: { tool: toolName, issues: [{ path: ["cursor"], message: "a string is required" }] },
        },
      ),
    });
  }
  // `id.0` reads the first part again: an `answer_too_large` error names it for a client that shows
  // the model the error rather than the part beside it.
  const match = /^([A-Za-z0-9_-]{22})\.(0|[1-9][0-9]{0,8})$/.exec(cursor);
  const id = match?.[1] ?? "";
  const entry = store.get(id);
  const part = Number(match?.[2]);
  const start = entry?.starts[part];
  // A cursor of another owner reads as unknown: its existence is not told either.
  if (entry === undefined || entry.owner !== owner || start === undefined) {
    return toCallToolResult({
      ok: false,
      error: new ToolError(
        "not_found",
        `The cursor "${cursor.slice(0, 40)}" is not known to this client: a cursor is read only with the credential that received it (the console's bearer token; for tackle mcp, its own connection), for ${Math.round(store.ttlMs / 60_000)} minutes after its last read, while the server keeps it. Call the tool again for a fresh answer.`,
        { data: { resource: "cursor", id: cursor.slice(0, 40) } },
      ),
    });
  }
  store.read(id, entry, now);
  const taken = takePage(entry.items, start, part === 0 ? entry.firstLimit : limit, entry.scans);
  if (taken.next !== undefined && entry.starts[part + 1] === undefined) entry.starts[part + 1] = taken.next;
  const head = `[Part ${part + 1} of a cut answer (${count(entry.totals.items, "item")}, ${count(entry.totals.characters, "character")} of text, ${tokensOf(entry.totals)} tokens in all), ${taken.tokens} tokens: ${describePart(entry.items, start, taken)}.`;
  if (taken.next === undefined) {
    return answer(taken, `${head} This is the last part.]`, { part: part + 1, complete: true });
  }
  const next = `${id}.${part + 1}`;
  return answer(
    taken,
    `${head} Left out: ${leftOut(entry.items, taken.next)}. Read the next part with ${toolName} {"cursor":"${next}"}.]`,
    { part: part + 1, cursor: next },
  );
}

function answer(
  page: Page,
  summary: string,
  meta: Record<string, unknown>,
  base?: CallToolResult,
): CallToolResult {
  const result: CallToolResult = {
    content: [...page.items, { type: "text", text: summary }],
    _meta: { ...base?._meta, "tackle/resultPage": meta },
  };
  if (base?.isError === true) result.isError = true;
  return result;
}

/**
 * Text counted for an answer's total, at most: past it the total is estimated from the density of
 * the text counted. A tokenizer reads base64 at ~1 µs a character on a busy machine, so counting a
 * 4-million-character answer whole held the server's loop for seconds to a minute; this bounds the
 * summary's cost at about a tenth of a second, whatever the answer's size (ADR 0555).
 */
const countedCharacters = 100_000;
/** The counted text is this many slices spread evenly over the answer's, so a density that drifts (ids growing along rows) is met. */
const sampleSlices = 10;

function totalsOf(items: readonly ResultItem[]): Totals {
  const characters = items.reduce((sum, item) => sum + (textOf(item)?.length ?? 0), 0);
  if (characters <= countedCharacters) {
    return { items: items.length, characters, tokens: itemsTokens(items), estimated: false };
  }
  const others = items.filter((item) => textOf(item) === undefined);
  const tokens = Math.round(textTokensEstimate(items, characters)) + itemsTokens(others);
  return { items: items.length, characters, tokens, estimated: true };
}

/** The tokens of the items' text (`characters` long in all), from slices spread evenly over it. */
function textTokensEstimate(items: readonly ResultItem[], characters: number): number {
  const texts = items.flatMap((item) => textOf(item) ?? []);
  const sliceLength = countedCharacters / sampleSlices;
  let sampled = 0;
  let tokens = 0;
  for (let slice = 0; slice < sampleSlices; slice++) {
    // Where the slice starts in the texts joined, and so in which text.
    let at = Math.floor((slice * (characters - sliceLength)) / (sampleSlices - 1));
    let index = 0;
    while (index < texts.length - 1 && at >= (texts[index] as string).length) {
      at -= (texts[index] as string).length;
      index += 1;
    }
    const piece = (texts[index] as string).slice(at, at + sliceLength);
    tokens += countTokens(piece);
    sampled += piece.length;
  }
  return (tokens * characters) / Math.max(1, sampled);
}

function tokensOf(totals: Totals): string {
  return `${totals.estimated ? "about " : ""}${totals.tokens}`;
}

/** What a page holds, 1-based: `item 1 (text) characters 1–31204 of 2000000`, `items 2–5 whole`. */
function describePart(items: readonly ResultItem[], start: Position, page: Page): string {
  const segments: string[] = [];
  let wholeFrom: number | undefined;
  let wholeTo = 0;
  const flushWhole = () => {
    if (wholeFrom === undefined) return;
    segments.push(wholeFrom === wholeTo ? `item ${wholeFrom} whole` : `items ${wholeFrom}–${wholeTo} whole`);
    wholeFrom = undefined;
  };
  for (let index = 0; index < page.items.length; index++) {
    const at = start.item + index;
    const text = textOf(items[at] as ResultItem);
    const from = index === 0 ? start.offset : 0;
    const to = page.next !== undefined && page.next.item === at ? page.next.offset : (text?.length ?? 0);
    if (text === undefined || (from === 0 && to === text.length)) {
      wholeFrom ??= at + 1;
      wholeTo = at + 1;
      continue;
    }
    flushWhole();
    segments.push(`item ${at + 1} characters ${from + 1}–${to} of ${text.length}`);
  }
  flushWhole();
  return segments.join(", ");
}

function leftOut(items: readonly ResultItem[], next: Position): string {
  let characters = 0;
  for (let index = next.item; index < items.length; index++) {
    const text = textOf(items[index] as ResultItem);
    if (text !== undefined) characters += text.length - (index === next.item ? next.offset : 0);
  }
  const whole = items.length - next.item - (next.offset > 0 ? 1 : 0);
  const rest = next.offset > 0 ? `the rest of item ${next.item + 1}` : undefined;
  const following = whole > 0 ? `${rest === undefined ? "" : " and "}${count(whole, "more item")}` : "";
  return `${rest ?? ""}${following} (${count(characters, "character")} of text)`;
}

function sizeOf(items: readonly ResultItem[]): number {
  return items.reduce((sum, item) => sum + Buffer.byteLength(JSON.stringify(item)), 0);
}

function count(value: number, noun: string): string {
  return `${value} ${noun}${value === 1 ? "" : "s"}`;
}
