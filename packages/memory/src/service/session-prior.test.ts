import assert from "node:assert/strict";
import { it } from "node:test";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createMemoryService } from "./create-memory-service.ts";
import { createScopeSnapshots } from "./scope-snapshot.ts";
import { createSearchRanked } from "./search-ranked.ts";
import { createServiceContext } from "./service-context.ts";
import { sessionScores, sessionsOf } from "./session-prior.ts";

/** Two speakers' turns, a minute apart, in sessions days apart. */
async function conversation(sessions: readonly { date: string; turns: readonly string[] }[]) {
  let now = new Date();
  const store = createSqliteStore({ path: ":memory:" });
  const service = createMemoryService({ store, now: () => now });
  for (const { date, turns } of sessions) {
    for (const [index, text] of turns.entries()) {
      now = new Date(Date.parse(date) + index * 60_000);
      await service.add("t", { userId: "talk", kind: "episode", content: text });
    }
  }
  now = new Date("2024-01-01T00:00:00Z");
  return { store, service, context: createServiceContext({ store, now: () => now }) };
}

const lisbon = {
  date: "2023-05-02T19:00:00Z",
  turns: [
    "Jess: back from Lisbon!! the trip was perfect",
    "Omar: welcome back. how was the flight",
    "Jess: delayed 3 hours but who cares, Lisbon was worth it",
    "Omar: did you go up to the castle in Lisbon",
    "Jess: twice. the views over Lisbon at night omg",
    "Omar: jealous",
    "Jess: honestly the best thing I ate on the whole trip was the custard tarts",
    "Omar: bring me some next time",
    "Jess: the hostel in Lisbon had a rooftop too",
    "Omar: ok now I'm really jealous",
  ],
};
const dentist = {
  date: "2023-06-10T19:00:00Z",
  turns: [
    "Omar: how did it go",
    "Jess: the dentist was awful, I can't eat anything hot",
    "Omar: oof, soup for a week",
    "Jess: yep",
    "Omar: my band has a gig on Friday",
    "Jess: I'll be there",
  ],
};
const question = "What did Jess eat on her trip to Lisbon?";
const chatter = ["Omar: hey", "Jess: long shift today", "Omar: same, release week", "Jess: sleep well"];
const others = ["2023-03-01", "2023-03-20", "2023-04-11", "2023-07-04", "2023-08-15"].map((day) => ({
  date: `${day}T19:00:00Z`,
  turns: chatter,
}));

it("the session that talks of the question lifts its turn that answers in other words", async () => {
  const { service, context } = await conversation([
    ...others.slice(0, 3),
    lisbon,
    dentist,
    ...others.slice(3),
  ]);
  const top = async (sessions: boolean) =>
    (await createSearchRanked(context, { sessions })("t", { userId: "talk" }, question, 10, undefined)).map(
      (hit) => hit.memory.content,
    );
  const tarts = lisbon.turns[6]!;
  const dentistTurn = dentist.turns[1]!;
  const without = await top(false);
  assert.ok(
    without.indexOf(dentistTurn) < without.indexOf(tarts),
    `without sessions the dentist turn (its rarest word) comes first: ${JSON.stringify(without)}`,
  );
  const shipped = await top(true);
  assert.ok(
    shipped.indexOf(tarts) >= 0 && shipped.indexOf(tarts) < shipped.indexOf(dentistTurn),
    `the Lisbon session lifts the tarts above the dentist: ${JSON.stringify(shipped)}`,
  );
  await service.close();
});

it("a session is a run of one scope's memories without a pause of more than half an hour", async () => {
  const { store, service } = await conversation([
    { date: "2023-05-02T19:00:00Z", turns: ["Jess: one", "Omar: two"] },
    // 29 minutes after the last turn: the same session.
    { date: "2023-05-02T19:30:00Z", turns: ["Jess: three"] },
    // 31 minutes after it: a new session.
    { date: "2023-05-02T20:01:00Z", turns: ["Omar: four", "Jess: five"] },
  ]);
  const snapshot = (await createScopeSnapshots(store).get("t", { userId: "talk" }))!;
  const { of } = sessionsOf(snapshot);
  assert.deepEqual(
    snapshot.memories.map((memory, position) => [memory.content, of[position]]),
    [
      ["Jess: one", 0],
      ["Omar: two", 0],
      ["Jess: three", 0],
      ["Omar: four", 1],
      ["Jess: five", 1],
    ],
  );
  assert.deepEqual([...sessionScores(snapshot, ["four"])], [0, 1], "scores are relative to the best session");
  assert.deepEqual([...sessionScores(snapshot, ["nothing"])], [0, 0]);
  await service.close();
});

it("memories all written at one time are one session, and the prior changes no order", async () => {
  const { service, context } = await conversation([{ date: "2023-05-02T19:00:00Z", turns: [] }]);
  for (const text of [...lisbon.turns, ...dentist.turns]) {
    await service.add("t", { userId: "talk", kind: "episode", content: text });
  }
  const order = async (sessions: boolean) =>
    (await createSearchRanked(context, { sessions })("t", { userId: "talk" }, question, 10, undefined)).map(
      (hit) => hit.memory.id,
    );
  assert.deepEqual(await order(true), await order(false));
  await service.close();
});
