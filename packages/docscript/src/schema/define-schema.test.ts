import assert from "node:assert/strict";
import { it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { openDocument } from "../document/document-session.ts";
import { defineSchema } from "./define-schema.ts";
import { field } from "./field.ts";
import { SchemaDefinitionError } from "./schema-definition-error.ts";
import { validatePayload } from "./validate-payload.ts";

it("refuses a schema with mistakes, naming each", () => {
  assert.throws(
    () =>
      defineSchema({
        name: "broken",
        entities: {
          note: { fields: { lines: field.list(field.text() as never) }, identity: ["title"] },
        },
        relations: {
          about: { from: ["note"], to: ["ghost"] },
          pinned: { from: ["note"], to: ["note"], cardinality: "one-to-many", slot: { name: "pin" } },
        },
      }),
    (error: unknown) => {
      assert.ok(error instanceof SchemaDefinitionError);
      assert.equal(error.code, "schema_definition");
      assert.deepEqual(error.problems, [
        "note.lines: list items must be scalars or records",
        'entity kind "note" names unknown identity field "title"',
        'relation kind "about" names unknown entity kind "ghost"',
        'relation kind "pinned": a slot holds one target, so its cardinality must end in "-to-one"',
      ]);
      return true;
    },
  );
});

it("validates nested records and list items, naming each path", () => {
  const fields = {
    title: field.string({ maxLength: 5 }),
    tags: field.list(field.enum(["a", "b"]), { maxItems: 2 }),
    size: field.record({
      width: field.integer({ min: 1 }),
      unit: field.enum(["px", "em"], { default: "px" }),
    }),
  };
  const issues = validatePayload(
    fields,
    { title: "too long", tags: ["a", "c", "b"], size: { width: 0.5, extra: true } },
    "e1",
  );
  assert.deepEqual(
    issues.map((issue) => [issue.constraint, issue.path.join(".")]),
    [
      ["field.maxLength", "title"],
      ["field.maxItems", "tags"],
      ["field.enum", "tags.1"],
      ["field.unknown", "size.extra"],
      ["field.integer", "size.width"],
      ["field.min", "size.width"],
      ["field.required", "size.unit"],
    ],
  );
  assert.ok(issues.every((issue) => issue.entityId === "e1"));
});

it('refuses a field named "__proto__" at any depth, and keeps fields named "constructor" and "toString"', () => {
  // Own keys, as a schema built from data (JSON, Object.fromEntries) has them.
  const proto = <Value>(value: Value): Record<string, Value> => Object.fromEntries([["__proto__", value]]);
  assert.throws(
    () =>
      defineSchema({
        name: "hostile",
        entities: {
          thing: {
            fields: {
              ...proto(field.string({ default: "d" })),
              box: field.record(proto(field.number())),
              rows: field.list(field.record(proto(field.number()))),
            },
          },
        },
      }),
    (error: unknown) => {
      assert.ok(error instanceof SchemaDefinitionError);
      assert.deepEqual(error.problems, [
        'thing.__proto__: "__proto__" cannot be a field name',
        'thing.box.__proto__: "__proto__" cannot be a field name',
        'thing.rows[].__proto__: "__proto__" cannot be a field name',
      ]);
      return true;
    },
  );
  const schema = defineSchema({
    name: "inherited",
    entities: {
      thing: {
        fields: { constructor: field.string({ default: "d" }), toString: field.number({ optional: true }) },
      },
    },
  });
  const doc = new LoroDoc();
  const made = openDocument(doc, schema).entities.create({ entityKind: "thing", payload: { toString: 2 } });
  doc.commit();
  assert.deepEqual(openDocument(doc, schema).entities.get(made.entityId)?.payload, {
    constructor: "d",
    toString: 2,
  });
});
