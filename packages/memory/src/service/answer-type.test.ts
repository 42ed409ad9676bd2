import assert from "node:assert/strict";
import { it } from "node:test";
import fc from "fast-check";
import { rankedConversation } from "../../test/support/ranked-conversation.ts";
import type { StoredMemory } from "../store/memory-store.ts";
import { answerTypeOf, holdsAnswerType, liftByAnswerType } from "./answer-type.ts";

it("a question asks for a time, a number, or neither", () => {
  assert.equal(answerTypeOf("When did Jess adopt Pickle?"), "time");
  assert.equal(answerTypeOf("How long after the offer did Omar start?"), "time");
  assert.equal(answerTypeOf("In which month was the wedding?"), "time");
  assert.equal(answerTypeOf("Roughly when did Zoe hear from Ohio State?"), "time");
  assert.equal(answerTypeOf("The hike was postponed. When did they walk it?"), "time");
  assert.equal(answerTypeOf("What was the date of Bernie's last day at work?"), "time");
  assert.equal(answerTypeOf("How much time passed between the offer and the sale?"), "time");
  assert.equal(
    answerTypeOf("What did Maya say when the dog ran off?"),
    undefined,
    "a when inside the sentence",
  );
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
  const turns = [
    "Maya: the new dog is the best dog ever, honestly",
    "Jonas: haha i bet",
    "Maya: we brought the dog home from the shelter last Saturday",
    "Jonas: nice",
  ];
  const conversation = await rankedConversation(turns, "2023-05-01T18:00:00Z");
  const first = (answerTypes: boolean) =>
    conversation.first("When did Maya get the dog?", { answerTypes, neighbours: false });
  assert.equal(await first(false), turns[0], "without the prior the turn naming the dog twice leads");
  assert.equal(await first(true), turns[2], "with it the turn that says when leads");
  await conversation.close();
});

it("the lift only reorders: a hit gains half its score exactly when it holds the asked-for kind", () => {
  const pieces = [
    "the dog",
    "last Saturday",
    "it cost $400",
    "honestly",
    "I may go",
    "in March",
    "two weeks",
  ];
  const questions = ["When did Maya get the dog?", "How much was the dog?", "What is the dog called?"];
  fc.assert(
    fc.property(
      fc.constantFrom(...questions),
      fc.array(
        fc.record({
          text: fc.array(fc.constantFrom(...pieces), { minLength: 1, maxLength: 4 }),
          score: fc.double({ min: 0.01, max: 10, noNaN: true }),
        }),
        { minLength: 1, maxLength: 40 },
      ),
      (question, drawn) => {
        const hits = drawn.map(({ text, score }, index) => ({
          memory: {
            id: `m${index}`,
            content: text.join(", "),
            createdAt: "2024-01-01T00:00:00Z",
          } as StoredMemory,
          score,
        }));
        const type = answerTypeOf(question);
        const lifted = new Map(liftByAnswerType(hits, question).map((hit) => [hit.memory.id, hit.score]));
        assert.equal(lifted.size, hits.length);
        for (const hit of hits) {
          const holds = type !== undefined && holdsAnswerType(hit.memory.content, type);
          assert.equal(lifted.get(hit.memory.id), holds ? hit.score * 1.5 : hit.score, hit.memory.content);
        }
      },
    ),
    { numRuns: 2_000 },
  );
});
