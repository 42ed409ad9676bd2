import assert from "node:assert/strict";
import { it } from "node:test";
import { z } from "zod";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "../tool-set/create-tool-set.ts";
import { jsonSchema, toJsonSchema, validateWith } from "./schema.ts";

it("jsonSchema() carries a wire schema as is and validates only when told how", async () => {
  const schema = { type: "object", properties: { q: { type: "string" } }, required: ["q"] };
  const open = jsonSchema(schema);
  assert.deepEqual(toJsonSchema(open), schema);
  assert.deepEqual(await validateWith(open, { anything: true }), { ok: true, value: { anything: true } });

  const checked = jsonSchema(schema, {
    validate: (value) =>
      typeof (value as { q?: unknown }).q === "string"
        ? undefined
        : [{ path: ["q"], message: "required string" }],
  });
  assert.deepEqual(await validateWith(checked, {}), {
    ok: false,
    issues: [{ path: ["q"], message: "required string" }],
  });
});

it("a tool over jsonSchema() is served like any other", async () => {
  const remote = defineTool({
    name: "remote.echo",
    description: "",
    input: jsonSchema<{ text: string }>({ type: "object", properties: { text: { type: "string" } } }),
    execute: ({ text }) => text,
  });
  assert.equal(await createToolSet([remote]).invoke("remote.echo", { text: "hi" }), "hi");
});

it("validateWith flattens nested issue paths", async () => {
  const result = await validateWith(z.object({ items: z.array(z.object({ n: z.number() })) }), {
    items: [{ n: 1 }, {}],
  });
  assert.deepEqual(result.ok ? [] : result.issues.map((issue) => issue.path), [["items", 1, "n"]]);
});

it("refuses a schema that cannot describe itself as JSON Schema", () => {
  const opaque = { "~standard": { version: 1, vendor: "x", validate: (value: unknown) => ({ value }) } };
  assert.throws(
    () => defineTool({ name: "opaque", description: "", input: opaque as never, execute: () => 1 }),
    /cannot describe itself as JSON Schema/,
  );
});
