/**
 * The approval form keeps to the call's own arguments and the schema's own properties: a property
 * named like an inherited member (`constructor`, `toString`, `__proto__`) is an ordinary field, and a
 * schema `type` naming one is not a primitive.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { approvalForm } from "./approval-form.ts";

const schema = {
  type: "object",
  properties: {
    constructor: { type: "string" },
    toString: { type: "number" },
    ["__proto__"]: { type: "string" },
    note: { type: "valueOf" },
  },
};

test("inherited names are ordinary fields: kept, prefilled from the call's own value, edited only when answered", () => {
  const args = JSON.parse('{"constructor":"Ada","__proto__":"kept"}') as Record<string, unknown>;
  const form = approvalForm("ledger.pay", args, schema);
  const properties = form.requestedSchema.properties as Record<string, Record<string, unknown>>;
  assert.deepEqual(Object.keys(properties).sort(), [
    "__proto__",
    "approve",
    "constructor",
    "reason",
    "toString",
  ]);
  assert.equal(Object.getOwnPropertyDescriptor(properties, "constructor")?.value.default, "Ada");
  assert.equal(Object.hasOwn(properties.toString!, "default"), false, "no inherited function as a default");
  assert.equal(Object.getOwnPropertyDescriptor(properties, "__proto__")?.value.default, "kept");
  assert.doesNotMatch(form.message, /toString.*run as shown/);

  // An answer that edits nothing: no inherited member of the reply is read as an edit.
  assert.deepEqual(form.answer({ action: "accept", content: { approve: true } }), { approved: true });
  const edited = form.answer({
    action: "accept",
    content: JSON.parse('{"approve":true,"toString":3,"__proto__":"changed"}'),
  });
  assert.equal(edited.approved, true);
  const editedArgs = edited.editedArgs!;
  assert.equal(editedArgs.constructor, "Ada");
  assert.equal(editedArgs.toString, 3);
  assert.equal(Object.getOwnPropertyDescriptor(editedArgs, "__proto__")?.value, "changed");
  assert.equal(Object.getPrototypeOf(editedArgs), Object.prototype);
});

test("an argument named approve or reason moves the switch to a free key", () => {
  const form = approvalForm(
    "ledger.pay",
    { approve: "yes" },
    { type: "object", properties: { approve: { type: "string" }, reason: { type: "string" } } },
  );
  const properties = form.requestedSchema.properties as Record<string, unknown>;
  assert.ok(Object.hasOwn(properties, "_approve") && Object.hasOwn(properties, "_reason"));
  assert.deepEqual(form.answer({ action: "accept", content: { _approve: false, _reason: "no" } }), {
    approved: false,
    reason: "no",
  });
});
