/** The built-in demo module: a few small, useful tools that show a bundle end to end. */
import { defineTool } from "@tackle/core";
import { z } from "zod";

const echo = defineTool({
  name: "echo",
  description: "Returns the text it is given, unchanged.",
  input: z.object({ text: z.string().describe("The text to return") }),
  annotations: { readOnlyHint: true, idempotentHint: true },
  execute: ({ text }) => ({ text }),
});

const add = defineTool({
  name: "add",
  description: "Adds numbers and returns their sum.",
  input: z.object({ numbers: z.array(z.number()).min(1).describe("The numbers to add") }),
  annotations: { readOnlyHint: true, idempotentHint: true },
  execute: ({ numbers }) => ({ sum: numbers.reduce((total, value) => total + value, 0) }),
});

const now = defineTool({
  name: "now",
  description:
    "The current time as ISO 8601 (UTC) and as milliseconds since the epoch, optionally in a time zone.",
  input: z.object({
    timeZone: z.string().optional().describe("An IANA time zone such as Europe/Berlin; defaults to UTC"),
  }),
  annotations: { readOnlyHint: true },
  execute: ({ timeZone }) => {
    const date = new Date();
    const zone = timeZone ?? "UTC";
    // Intl throws a RangeError for an unknown zone; the tool set turns it into a tool_failed result.
    const local = new Intl.DateTimeFormat("sv-SE", {
      timeZone: zone,
      dateStyle: "short",
      timeStyle: "medium",
    }).format(date);
    return { iso: date.toISOString(), epochMs: date.getTime(), timeZone: zone, local };
  },
});

const textStats = defineTool({
  name: "text_stats",
  description: "Counts the characters, words, lines and sentences of a text.",
  input: z.object({ text: z.string() }),
  annotations: { readOnlyHint: true, idempotentHint: true },
  execute: ({ text }) => ({
    characters: [...text].length,
    words: text.split(/\s+/u).filter((word) => word !== "").length,
    lines: text === "" ? 0 : text.split(/\r?\n/u).length,
    sentences: text.split(/[.!?]+/u).filter((sentence) => sentence.trim() !== "").length,
  }),
});

export default [echo, add, now, textStats];
