import assert from "node:assert/strict";
import { it } from "node:test";
import type { EmbeddingModelV4 } from "@ai-sdk/provider";
import type { StoredMemory } from "../store/memory-store.ts";
import { createSqliteStore } from "../store/sqlite/create-sqlite-store.ts";
import { createHashingTestEmbedder } from "../testing/create-hashing-test-embedder.ts";
import {
  addresses,
  askedNames,
  contextTurns,
  liftBySpecificity,
  liftByTimeAndSpeaker,
  namesIn,
  newNames,
  onlyAsks,
  possessivesOf,
  scaleByContextCoverage,
  speaksOfSelf,
  spreadToNeighbours,
  timeWindow,
} from "./conversation-retrieval.ts";
import { createMemoryService } from "./create-memory-service.ts";
import { byScore } from "./rank-memories.ts";
import { relatedWords } from "./related-words.ts";

it("reads the time a question names", () => {
  const now = new Date("2024-03-10T12:00:00Z");
  const may = timeWindow("What did Maya do in May 2023?", now)!;
  assert.equal(new Date(may.from).toISOString().slice(0, 10), "2023-05-01");
  assert.equal(new Date(may.to).toISOString().slice(0, 10), "2023-06-01");
  const lastMay = timeWindow("Where did she travel last May?", now)!;
  assert.equal(new Date(lastMay.from).toISOString().slice(0, 10), "2023-05-01");
  assert.equal(timeWindow("May I ask what her dog is called?", now), undefined, "'may' the verb is no month");
});

it("finds the names a first hit adds to the question", () => {
  assert.deepEqual(newNames("Maya: My sister Lena is staying with us.", "What does Maya's sister play?"), [
    "Lena",
  ]);
  // A name opening a sentence counts once it is known as a name from inside other sentences.
  assert.deepEqual(newNames("Maya: Lena played her violin.", "Who played?"), []);
  assert.deepEqual(newNames("Maya: Lena played her violin.", "Who played?", new Set(["Lena"])), ["Lena"]);
  assert.deepEqual(newNames("Maya: Guess what, I won.", "What did Maya win?", new Set(["Lena"])), []);
});

const turn = (id: string, content: string, speaker?: string) =>
  ({
    id,
    content,
    sessionId: "s1",
    createdAt: "2023-01-01T00:00:00Z",
    metadata: speaker ? { speaker } : {},
  }) as unknown as StoredMemory;

it("a question about Maya's sister lifts Maya's own 'my sister' over someone else's sister", () => {
  assert.deepEqual(possessivesOf("What instrument does Maya's sister play?"), [
    { owner: "maya", thing: "sister" },
  ]);
  const lifted = liftByTimeAndSpeaker(
    [
      { memory: turn("other", "Maya: Vera's sister is moving to Denver apparently.", "Maya"), score: 1 },
      { memory: turn("own", "Maya: My sister Lena is staying with us.", "Maya"), score: 0.8 },
      { memory: turn("jonas", "Jonas: My sister Ada is visiting.", "Jonas"), score: 0.9 },
    ],
    "What instrument does Maya's sister play?",
    undefined,
  );
  const score = (id: string) => lifted.find((hit) => hit.memory.id === id)!.score;
  assert.ok(score("own") > score("other"), "Maya's 'my sister' outranks Vera's sister");
  assert.ok(score("own") > score("jonas"), "Jonas's 'my sister' is not Maya's");
});

it("a turn whose context covers the whole question keeps its score; one sharing a single word loses part", () => {
  const adopted = turn("a", "Maya: We adopted a beagle from the shelter!", "Maya");
  const asked = turn("b", "Jonas: Did you pick a name yet?", "Jonas");
  const reply = turn("c", "Maya: Yes, Ziggy! He answers to it.", "Maya");
  const other = turn("d", "Maya: Iris says their beagle keeps escaping.", "Maya");
  const context = contextTurns(
    [asked],
    new Map([
      [
        "b",
        [
          { memory: adopted, offset: -1 },
          { memory: reply, offset: 1 },
        ],
      ],
    ]),
  );
  assert.equal(context.get("c")?.get(-2)?.id, "a", "the reply knows the turn two before it");
  const scaled = scaleByContextCoverage(
    [
      { memory: reply, score: 1 },
      { memory: other, score: 1 },
      { memory: turn("e", "Maya: Weather is awful.", "Maya"), score: 1 },
      { memory: turn("f", "Maya: Haha, totally.", "Maya"), score: 1 },
    ],
    context,
    ["maya", "name", "beagle"],
  );
  assert.deepEqual(scaled[0]!.memory.id, "c");
  assert.equal(scaled[0]!.score, 1, "every term is in the reply's context");
  assert.ok(scaled.find((hit) => hit.memory.id === "d")!.score < 0.9);
});

it("a turn that says something specific is lifted over small talk that repeats its words", () => {
  const talk = [
    "How was your week?",
    "Weather is awful this week.",
    "How was your weekend?",
    "Busy week, honestly.",
  ];
  const hits = [
    ...Array.from({ length: 8 }, (_, index) => ({
      memory: turn(`t${index}`, `Maya: ${talk[index % talk.length]}`, "Maya"),
      score: 1,
    })),
    { memory: turn("event", "Maya: Guess what, I finally gave a talk at a local meetup!", "Maya"), score: 1 },
  ];
  const lifted = liftBySpecificity(hits, 2);
  assert.equal(lifted[0]!.memory.id, "event");
  assert.equal(lifted[0]!.score, 3, "the most specific hit gets the whole lift");
  assert.ok(lifted.at(-1)!.score < 2.5);
});

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

it("conversations: the reply that answers, the turn of the month asked, the second hop", async () => {
  let now = new Date("2023-01-01T18:00:00Z");
  const service = createMemoryService({ store: createSqliteStore({ path: ":memory:" }), now: () => now });
  const say = async (date: string, speaker: string, text: string) => {
    now = new Date(date);
    await service.add("t", { userId: "talk", content: `${speaker}: ${text}`, metadata: { speaker } });
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
  await say("2023-05-03T18:00:00Z", "Maya", "My sister Lena is staying with us for a few days.");
  await filler(12);
  await say("2023-06-03T18:00:00Z", "Maya", "Lena played her violin at the recital.");
  now = new Date("2023-07-01T00:00:00Z");
  const top = async (query: string, k: number) =>
    (await service.search("t", { userId: "talk", query, limit: k })).results.map((hit) => hit.memory.content);
  assert.ok((await top("What did Maya name the beagle?", 5)).some((text) => text.includes("Ziggy")));
  assert.ok(
    (await top("What did Maya accomplish in April 2023?", 5)).some((text) => text.includes("marathon")),
  );
  const sister = await top("What instrument does Maya's sister play?", 5);
  assert.ok(
    sister.some((text) => text.includes("violin")),
    "the second hop found Lena's turn",
  );
  await service.close();
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
 * embedder after a two-word thesaurus, and a word the related-words table lacks), standing in for a
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
  const moved = Math.abs(ranks.hashing!.asked - ranks.bm25!.asked);
  assert.ok(moved <= 2, `the hashing embedder only restates the words (${JSON.stringify(ranks)})`);
  assert.ok(
    ranks.concept!.asked < ranks.bm25!.asked && ranks.concept!.reply < ranks.bm25!.reply,
    `the concept embedder lifts the gig question and its reply (${JSON.stringify(ranks)})`,
  );
});

it("related words: a question's frame word leads to the words a conversation answers with, one way", () => {
  for (const word of ["work", "works", "working"]) assert.ok(relatedWords(word).includes("job"), word);
  assert.ok(!relatedWords("work").includes("work"), "the word itself is asked already");
  assert.ok(relatedWords("instrument").includes("violin"));
  assert.deepEqual(relatedWords("violin"), [], "naming the violin asks for the violin, not every instrument");
  assert.deepEqual(relatedWords("Ziggy"), []);
});

it("tells a turn that only asks from one that tells, and one speaking of its speaker from one about others", () => {
  assert.equal(onlyAsks("Jonas: How is the new job going, Maya?"), true);
  assert.equal(onlyAsks("Maya: Congratulations! Did you pick a name yet?"), false);
  assert.equal(onlyAsks("Maya: I love it."), false);
  assert.equal(speaksOfSelf("Maya: I love it. Being a nurse is what I hoped for."), true);
  assert.equal(speaksOfSelf("Maya: I'm off to Lisbon"), true);
  assert.equal(speaksOfSelf("Maya: My neighbour works as a nurse at Globex."), false);
  assert.equal(speaksOfSelf("Maya: It is Iceland, in the end."), false, "a word starting with I is no I");
});

it("without a model: 'Where does Maya work?' finds the reply to 'How is the new job going, Maya?' over other people's jobs", async () => {
  let now = new Date("2023-03-01T18:00:00Z");
  const service = createMemoryService({ store: createSqliteStore({ path: ":memory:" }), now: () => now });
  const say = async (speaker: string, text: string) => {
    now = new Date(now.getTime() + 60_000);
    await service.add("t", {
      userId: "talk",
      kind: "episode",
      content: `${speaker}: ${text}`,
      metadata: { speaker },
    });
  };
  const jobs = ["nurse", "baker", "carpenter", "teacher", "pharmacist", "architect"];
  const places = ["Globex", "Northwind", "Acme Health", "Stark Foods", "Umbrella Labs", "Wayne Logistics"];
  for (let index = 0; index < 12; index += 1) {
    await say(
      "Maya",
      `My neighbour works as a ${jobs[index % 6]} at ${places[(index + 2) % 6]}, long hours.`,
    );
    await say("Jonas", "How was your week, Maya? Mine was mostly laundry.");
    await say("Maya", "Haha, totally. Work has been a lot.");
  }
  await say("Maya", "How is the new job going, Jonas?");
  await say("Jonas", "Good! Being a baker at Globex is hard but fun.");
  for (let index = 0; index < 4; index += 1) await say("Maya", "I had tacos with Vera on Sunday.");
  await say("Jonas", "How is the new job going, Maya?");
  await say("Maya", "I love it. Being a nurse at Initech is exactly what I hoped for.");
  for (let index = 0; index < 6; index += 1) await say("Jonas", "I had ramen with Lena yesterday.");
  now = new Date("2023-04-01T00:00:00Z");
  const found = await service.search("t", { userId: "talk", query: "Where does Maya work?", limit: 10 });
  const texts = found.results.map((hit) => hit.memory.content);
  const reply = texts.findIndex((text) => text.includes("Initech"));
  assert.ok(reply >= 0, `Maya's reply is in the top 10: ${JSON.stringify(texts)}`);
  const jonas = texts.findIndex((text) => text.includes("hard but fun"));
  assert.ok(jonas === -1 || jonas > reply, "Jonas's answer to Maya's question ranks below Maya's own");
  await service.close();
});

it("names: a word opening a sentence is a name when the texts never write it in lowercase", () => {
  const names = namesIn([
    "Jonas: Vera, who I met at my running club, has become a close friend.",
    "Jonas: Sad news, the bus was late.",
    "Maya: That is sad.",
    "Maya: What a finish.",
  ]);
  assert.ok(names.has("Vera"));
  assert.ok(!names.has("Sad"), "'sad' is written in lowercase too");
  assert.ok(!names.has("What"), "a stop word is no name");
  assert.ok(!names.has("Jonas"), "a 'Speaker:' prefix is no name of the text");
});

it("a question put by name to the one asked about: its reply by them takes the question's whole score", () => {
  assert.deepEqual([...askedNames("Where does Maya work?")], ["maya"]);
  assert.equal(addresses("Jonas: Maya, how's the new gig treating you?", new Set(["maya"])), true);
  assert.equal(
    addresses("Maya: How is it going, Jonas?", new Set(["maya"])),
    false,
    "the prefix is no address",
  );
  const question = turn("q", "Jonas: How is the new job going, Maya?", "Jonas");
  const reply = turn("r", "Maya: I love it. Being a nurse at Initech is what I hoped for.", "Maya");
  const neighbours = new Map([["q", [{ memory: reply, offset: 1 }]]]);
  const plain = spreadToNeighbours([{ memory: question, score: 1 }], neighbours);
  const named = spreadToNeighbours(
    [{ memory: question, score: 1 }],
    neighbours,
    0.35,
    0.7,
    new Set(["maya"]),
  );
  assert.equal(plain.find((hit) => hit.memory.id === "r")!.score, 0.7);
  assert.equal(named.find((hit) => hit.memory.id === "r")!.score, 1);
});
