// The bench's JS bundle: one echo tool with a zod schema, as a module would ship it.
import { defineTool } from "@tackle/core";
import { z } from "zod";

export default [
  defineTool({
    name: "echo",
    description: "Echoes its text",
    input: z.object({ text: z.string() }),
    execute: ({ text }) => ({ text }),
  }),
];
