/**
 * A relation moved among its holder's others changes only its position (ADR 0512): its target's
 * invariants answer as before when it is the end of no other relation of that kind and holder, and
 * are not asked again, in the write's check or the run's; when it is (an item held twice by one
 * list), the order it sees changes, and its invariants are checked as for any write.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { defineSchema } from "../schema/define-schema.ts";
import { field } from "../schema/field.ts";
import { openDocument } from "./document-session.ts";

/** Items an invariant reads the order of: an item's first relation must not be one named "last". */
function listSchema(asked: string[]) {
  return defineSchema({
    name: "lists",
    entities: {
      list: { fields: { name: field.string({ nullable: true }) } },
      item: { fields: { name: field.string({ nullable: true }) } },
    },
    relations: {
      has: { shapes: [{ from: ["list"], to: ["item"], cardinality: "many-to-many", ordered: true }] },
    },
    invariants: [
      {
        name: "first-not-last",
        kinds: ["item"],
        *checkEntity(item, view) {
          asked.push(item.entityId);
          const [first] = view.relationsOf(item.entityId, "has");
          if (first !== undefined && view.entity(first.endpoint0EntityId)?.payload.name === "last")
            yield { entityId: item.entityId, path: [], message: "held first by the list named last" };
        },
      },
    ],
  });
}

/** A list holding `items`, one relation each, on a fresh session over the stored document. */
function listOf(items: number, asked: string[]) {
  const schema = listSchema(asked);
  const session = openDocument(new LoroDoc(), schema);
  const list = session.entities.create({ entityKind: "list", payload: { name: "a" } });
  const itemIds: string[] = [];
  const relationIds: string[] = [];
  for (let index = 0; index < items; index++) {
    const item = session.entities.create({ entityKind: "item", payload: {} });
    itemIds.push(item.entityId);
    const relation = session.relations.link({
      relationKind: "has",
      endpoint0EntityId: list.entityId,
      endpoint1EntityId: item.entityId,
    });
    relationIds.push(relation.relationId);
  }
  return { schema, session, listId: list.entityId, itemIds, relationIds };
}

describe("a move among the holder's other relations", () => {
  it("asks no invariant of a target it holds once, in the write's check or the run's", () => {
    const asked: string[] = [];
    const { schema, session, listId, itemIds, relationIds } = listOf(3, asked);
    const next = openDocument(session.doc, schema);
    asked.length = 0;
    next.relations.move(relationIds[2] as string, { index: 0 });
    const scope = next.changedScope();
    assert.ok(new Set(scope.entityIds).has(itemIds[2] as string), "the target is still checked");
    assert.deepEqual(next.check(scope), []);
    assert.deepEqual(asked, [], "the target's invariant is not asked");
    assert.deepEqual(
      next.relations.of(listId, "has").map((relation) => relation.relationId),
      [relationIds[2], relationIds[0], relationIds[1]],
    );
  });

  it("checks the invariants of a target held twice by the holder: its order changes", () => {
    const asked: string[] = [];
    const { schema, session, listId, itemIds } = listOf(1, asked);
    const item = itemIds[0] as string;
    // A second list named "last", holding the item; then the first list holds it a second time.
    const last = session.entities.create({ entityKind: "list", payload: { name: "last" } });
    session.relations.link({
      relationKind: "has",
      endpoint0EntityId: last.entityId,
      endpoint1EntityId: item,
    });
    const again = session.relations.link({
      relationKind: "has",
      endpoint0EntityId: listId,
      endpoint1EntityId: item,
    });
    const next = openDocument(session.doc, schema);
    asked.length = 0;
    next.relations.move(again.relationId, { index: 0 });
    assert.ok(asked.includes(item), "the target's invariant is asked");
    next.check(next.changedScope());
    assert.ok(asked.filter((id) => id === item).length >= 2, "and again by the run's check");
  });

  it("checks the invariants of a target moved to another holder", () => {
    const asked: string[] = [];
    const { schema, session, itemIds, relationIds } = listOf(2, asked);
    const other = session.entities.create({ entityKind: "list", payload: { name: "last" } });
    const next = openDocument(session.doc, schema);
    asked.length = 0;
    // Held first by the list named "last" now: the invariant finds it, in the run's check.
    next.relations.move(relationIds[0] as string, { endpoint0EntityId: other.entityId, index: 0 });
    assert.ok(asked.includes(itemIds[0] as string));
    assert.deepEqual(
      next.check(next.changedScope()).map((issue) => `${issue.constraint} ${issue.entityId}`),
      [`invariant:first-not-last ${itemIds[0]}`],
    );
  });
});
