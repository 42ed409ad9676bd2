import assert from "node:assert/strict";
import { it } from "node:test";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { answerTypeOf, holdsAnswerType } from "./answer-type.ts";
import { createMemoryService } from "./create-memory-service.ts";
import { createSearchRanked } from "./search-ranked.ts";
import { createServiceContext } from "./service-context.ts";

it("a question asks for a time, a number, or neither", () => {
  assert.equal(answerTypeOf("When did Jess adopt Pickle?"), "time");
  assert.equal(answerTypeOf("How long after the offer did Omar start?"), "time");
  assert.equal(answerTypeOf("In which month was the wedding?"), "time");
  assert.equal(answerTypeOf("How much did the bass cost?"), "number");
  assert.equal(answerTypeOf("How many nights did Jess work in a row?"), "number");
  assert.equal(answerTypeOf("What did Jess name her dog?"), undefined);
  assert.equal(answerTypeOf("¿Cuándo adoptó Jess a Pickle?"), undefined, "English only");
});

it("a text says a time or holds a number; the modal 'may' is not a month", () => {
  for (const text of [
    "we got him last Saturday",
    "back in March",
    "the gig is at 9pm",
    "two weeks ago",
    "on the 14th",
    "moving in May",
  ])
    assert.ok(holdsAnswerType(text, "time"), text);
  for (const text of ["I may go", "he is so cute", "whenever you like"])
    assert.ok(!holdsAnswerType(text, "time"), text);
  for (const text of ["it cost $400", "four nights in a row", "paid 350 for it"])
    assert.ok(holdsAnswerType(text, "number"), text);
  assert.ok(!holdsAnswerType("a lot, honestly", "number"));
});

it("a question that asks when finds the turn that says when above one that only names the thing", async () => {
  let now = new Date("2023-05-01T18:00:00Z");
  const store = createSqliteStore({ path: ":memory:" });
  const service = createMemoryService({ store, now: () => now });
  const turns = [
    "Maya: the new dog is the best dog ever, honestly",
    "Jonas: haha i bet",
    "Maya: we brought the dog home from the shelter last Saturday",
    "Jonas: nice",
  ];
  for (const [index, content] of turns.entries()) {
    now = new Date(Date.parse("2023-05-01T18:00:00Z") + index * 60_000);
    await service.add("t", { userId: "talk", kind: "episode", content });
  }
  const context = createServiceContext({ store, now: () => now });
  const first = async (answerTypes: boolean) =>
    (
      await createSearchRanked(context, { answerTypes, neighbours: false })(
        "t",
        { userId: "talk" },
        "When did Maya get the dog?",
        3,
        undefined,
      )
    )[0]?.memory.content;
  assert.equal(await first(false), turns[0], "without the prior the turn naming the dog twice leads");
  assert.equal(await first(true), turns[2], "with it the turn that says when leads");
  await service.close();
});
