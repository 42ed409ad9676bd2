import assert from "node:assert/strict";
import { it } from "node:test";
import type { EmbeddingModelV4 } from "@ai-sdk/provider";
import type { StoredMemory } from "../store/memory-store.ts";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createHashingTestEmbedder } from "../testing/create-hashing-test-embedder.ts";
import { neighbouringTurns, speakerOf, spreadToNeighbours } from "./conversation-retrieval.ts";
import { createMemoryService } from "./create-memory-service.ts";
import { byScore } from "./rank-memories.ts";

const turn = (id: string, content: string, speaker?: string) =>
  ({
    id,
    content,
    sessionId: "s1",
    createdAt: "2023-01-01T00:00:00Z",
    metadata: speaker ? { speaker } : {},
  }) as unknown as StoredMemory;

it("the turn answering a question that matched gets more of its score than the turn before it", () => {
  const before = turn("a", "Maya: We went hiking on Sunday.");
  const question = turn("b", "Jonas: How is the new job going, Maya?");
  const reply = turn("c", "Maya: I love it, teaching at Initech is what I hoped for.");
  const ranked = spreadToNeighbours(
    [{ memory: question, score: 1 }],
    new Map([
      [
        "b",
        [
          { memory: before, offset: -1 },
          { memory: reply, offset: 1 },
        ],
      ],
    ]),
  );
  assert.deepEqual(
    ranked.map((hit) => hit.memory.id),
    ["b", "c", "a"],
  );
  assert.ok(ranked[1]!.score > ranked[2]!.score * 1.5, "the reply is clearly ahead of the turn before");
});

for (const path of ["episode with metadata.speaker", "plain `Speaker: text`"] as const) {
  it(`conversations (${path}): the reply that answers is found through the question before it`, async () => {
    let now = new Date("2023-01-01T18:00:00Z");
    const service = createMemoryService({ store: createSqliteStore({ path: ":memory:" }), now: () => now });
    const say = async (date: string, speaker: string, text: string) => {
      now = new Date(date);
      await service.add(
        "t",
        path === "plain `Speaker: text`"
          ? { userId: "talk", content: `${speaker}: ${text}` }
          : { userId: "talk", kind: "episode", content: `${speaker}: ${text}`, metadata: { speaker } },
      );
    };
    const chatter = [
      "How was your week?",
      "Busy, lots of emails.",
      "Same here, honestly.",
      "Weather is awful.",
    ];
    let day = 1;
    const filler = async (count: number) => {
      for (let index = 0; index < count; index += 1) {
        day += 1;
        const date = `2023-0${1 + Math.floor(day / 28)}-${String(1 + (day % 28)).padStart(2, "0")}T18:00:00Z`;
        await say(date, index % 2 ? "Jonas" : "Maya", `${chatter[index % chatter.length]} (${day})`);
      }
    };
    await filler(12);
    await say("2023-02-02T18:00:00Z", "Maya", "We adopted a beagle from the shelter on Saturday!");
    await say("2023-02-02T18:01:00Z", "Jonas", "Congratulations! Did you pick a name yet?");
    await say("2023-02-02T18:02:00Z", "Maya", "Yes, Ziggy! He already answers to it.");
    await filler(12);
    await say("2023-04-12T18:00:00Z", "Maya", "Guess what, I finally ran my first half marathon!");
    await filler(12);
    now = new Date("2023-07-01T00:00:00Z");
    const top = async (query: string, k: number) =>
      (await service.search("t", { userId: "talk", query, limit: k })).results.map(
        (hit) => hit.memory.content,
      );
    const named = await top("What did Maya name the beagle?", 5);
    assert.ok(
      named.some((text) => text.includes("Ziggy")),
      `"Yes, Ziggy!" holds no word of the question: ${JSON.stringify(named)}`,
    );
    assert.ok((await top("When did Maya run a half marathon?", 3)).some((text) => text.includes("marathon")));
    await service.close();
  });
}

it("a hit's neighbours are counted in turns: a fact mined between two turns is skipped", () => {
  const question = turn("q", "Jonas: Did you pick a name yet?", "Jonas");
  const fact = { ...turn("f", "We adopted a beagle from the shelter."), kind: "fact" } as StoredMemory;
  const reply = turn("r", "Maya: Yes, Ziggy!", "Maya");
  const next = turn("n", "Jonas: Cute.", "Jonas");
  const later = turn("l", "Maya: Anyway, work is busy.", "Maya");
  const around = [
    { memory: fact, offset: 1 },
    { memory: reply, offset: 2 },
    { memory: next, offset: 3 },
    { memory: later, offset: 4 },
  ];
  assert.deepEqual(
    neighbouringTurns(question, around).map(({ memory, offset }) => [memory.id, offset]),
    [
      ["r", 1],
      ["n", 2],
    ],
    "the fact shares a session with the turns but is not one of them",
  );
  const ranked = spreadToNeighbours([{ memory: question, score: 1 }], new Map([["q", around]]));
  assert.deepEqual(
    ranked.map((hit) => hit.memory.id),
    ["q", "r", "n"],
    "the reply gets the answer's share, the fact nothing",
  );
});

it("turns written through the events API: the facts mined from them do not hide the reply", async () => {
  let now = new Date("2023-01-01T18:00:00Z");
  const service = createMemoryService({ store: createSqliteStore({ path: ":memory:" }), now: () => now });
  let minute = 0;
  const say = async (speaker: string, content: string) => {
    minute += 1;
    now = new Date(Date.parse("2023-01-01T18:00:00Z") + minute * 60_000);
    await service.writeEvent("t", {
      userId: "talk",
      role: speaker === "Maya" ? "user" : "assistant",
      content,
      metadata: { speaker },
    });
  };
  const chatter = ["I had a busy week at work.", "My week was long too.", "I think it will rain."];
  for (let index = 0; index < 12; index += 1) await say(index % 2 ? "Jonas" : "Maya", chatter[index % 3]!);
  await say("Maya", "We adopted a beagle from the shelter and I love him already!");
  await say("Jonas", "Congratulations! How is he settling in?");
  await say("Maya", "Great. Ziggy answers to his name already.");
  for (let index = 0; index < 12; index += 1) await say(index % 2 ? "Jonas" : "Maya", chatter[index % 3]!);
  const stored = await service.listMemories("t", { userId: "talk", limit: 100 });
  assert.ok(
    stored.memories.some((memory) => memory.kind !== "episode"),
    "the events mined facts from the turns (the case this test is about)",
  );
  now = new Date("2023-03-01T00:00:00Z");
  const found = await service.search("t", { userId: "talk", query: "What is the beagle called?", limit: 5 });
  const texts = found.results.map((hit) => hit.memory.content);
  assert.ok(
    texts.some((text) => text.includes("Ziggy")),
    `the reply two turns after the beagle's turn: ${JSON.stringify(texts)}`,
  );
  await service.close();
});

it("a turn's speaker: its metadata, else the `Speaker:` prefix of a plainly added turn", () => {
  assert.equal(speakerOf(turn("a", "Maya: hi", "Maya")), "Maya");
  assert.equal(speakerOf(turn("b", "Dr Lee: Take two a day.")), "Dr Lee");
  assert.equal(speakerOf(turn("c", "The meeting is at 10:30: bring notes.")), undefined);
});
it("equal scores rank in one order every time: the later-written memory first, then by id", () => {
  const hit = (id: string, createdAt: string) => ({
    memory: { id, createdAt } as unknown as StoredMemory,
    score: 0.5,
  });
  const hits = [
    hit("b", "2023-01-01T00:00:00Z"),
    hit("a", "2023-01-01T00:00:00Z"),
    hit("c", "2023-02-01T00:00:00Z"),
  ];
  for (const order of [hits, [...hits].reverse(), [hits[1]!, hits[2]!, hits[0]!]]) {
    assert.deepEqual(
      [...order].sort(byScore).map((item) => item.memory.id),
      ["c", "a", "b"],
    );
  }
});

/**
 * A deterministic embedder that knows one thing the words do not: a "gig" is work (the hashing test
 * embedder after a two-word thesaurus; no word of the question is in it), standing in for a
 * semantic model.
 */
function conceptEmbedder(): EmbeddingModelV4 {
  const base = createHashingTestEmbedder();
  return {
    ...base,
    modelId: "concept-test-embedder",
    async doEmbed(options) {
      const values = options.values.map((value) => value.replace(/\bgigs?\b/gi, "work"));
      return base.doEmbed({ ...options, values });
    },
  };
}

it("fusion: an embedder that knows what the words miss lifts the turn it matches; the hashing one barely moves it", async () => {
  const question = "Where does Maya work?";
  const ranks: Record<string, { asked: number; reply: number }> = {};
  for (const [label, model, vectorWeight] of [
    ["bm25", undefined, undefined],
    ["hashing", createHashingTestEmbedder(), undefined],
    ["concept", conceptEmbedder(), 1],
  ] as const) {
    let now = new Date("2023-03-01T18:00:00Z");
    const service = createMemoryService({
      store: createSqliteStore({ path: ":memory:" }),
      now: () => now,
      ...(model ? { embeddingModel: model } : {}),
      ...(vectorWeight ? { vectorWeight } : {}),
    });
    const say = async (speaker: string, text: string) => {
      now = new Date(now.getTime() + 60_000);
      await service.add("t", { userId: "talk", content: `${speaker}: ${text}`, metadata: { speaker } });
    };
    const jobs = ["nurse", "baker", "carpenter", "teacher", "pharmacist", "architect"];
    const places = ["Globex", "Northwind", "Acme Health", "Stark Foods", "Umbrella Labs", "Wayne Logistics"];
    for (let index = 0; index < 12; index += 1) {
      if (index % 4 === 0) {
        await say("Maya", `My neighbour works as a ${jobs[index % 6]} at ${places[(index + 2) % 6]}.`);
      }
      await say("Jonas", `How was your week, Maya? Mine was mostly laundry (${index}).`);
      await say("Maya", `Busy, the ${jobs[(index + 1) % 6]} next door kept me up (${index}).`);
    }
    await say("Jonas", "How is the new gig going, Maya?");
    await say("Maya", "I love it. Being a nurse at Initech is exactly what I hoped for.");
    for (let index = 0; index < 6; index += 1)
      await say("Jonas", `I had ramen with Lena yesterday (${index}).`);
    const found = await service.search("t", { userId: "talk", query: question, limit: 40 });
    const rank = (text: string) => found.results.findIndex((hit) => hit.memory.content.includes(text));
    ranks[label] = { asked: rank("new gig"), reply: rank("Initech") };
    await service.close();
  }
  assert.ok(
    ranks.bm25!.asked > 10,
    `no word of the question is in "How is the new gig going" (${ranks.bm25!.asked})`,
  );
  // The chatter ties on "Maya": a vector nudges the order inside the tie, never to the top.
  assert.ok(
    ranks.hashing!.asked > 10 && ranks.hashing!.reply > 10,
    `the hashing embedder only restates the words: neither turn reaches the first ten (${JSON.stringify(ranks)})`,
  );
  assert.ok(
    ranks.concept!.asked < ranks.bm25!.asked && ranks.concept!.reply < ranks.bm25!.reply,
    `the concept embedder lifts the gig question and its reply (${JSON.stringify(ranks)})`,
  );
});
