/**
 * Generates the second evaluation set: long, dated conversations between two named speakers (the
 * shape of LoCoMo), with questions whose evidence turns are known. Seeded, so the shipped file is
 * reproducible:
 *   node_modules/.bin/node bench/memory/generate-dialogue-set.ts > bench/memory/eval/dialogues.json
 * What makes it hard, on purpose:
 *   - both speakers have the same kinds of facts (a pet, a job, a sibling, a trip), so a question
 *     must be answered from the named speaker's turns, not the other's;
 *   - many facts are answers to the other speaker's question ("Did you name the puppy yet?" — "Yes,
 *     Pepper!"), so the evidence turn shares few words with the question: its neighbour does;
 *   - temporal questions ask when something happened (the session's date answers) or what happened
 *     in a given month;
 *   - multi-hop questions need two turns from different sessions (who the sister is, then what she
 *     plays), the second naming someone the question does not;
 *   - each planted exchange is said in one of two or three phrasings, some with no word a lexical
 *     search can reach ("How's the new gig treating you?"), and small talk is a greeting, a reaction
 *     or a bit of news (or two of them), so few lines repeat word for word and a ranking cannot lean
 *     on small talk being one template.
 * Conversations alternate between "dev" (ranking may be tuned on them) and "held-out" (reported only).
 */

import {
  achievements,
  chores,
  cities,
  companies,
  countries,
  foods,
  greetings,
  instruments,
  jobs,
  monthNames,
  petNames,
  pets,
  reactions,
  speakers,
  thirdParties,
} from "./dialogue-words.ts";

function mulberry32(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}

const random = mulberry32(20261130);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const pickOther = <T>(items: readonly T[], not: T): T => {
  for (;;) {
    const item = pick(items);
    if (item !== not) return item;
  }
};

const fillerTopics: (() => string)[] = [
  () => `Mine was mostly ${pick(chores)}.`,
  () => `Spent half of Sunday on ${pick(chores)}, not fun.`,
  () => `I had ${pick(foods)} with ${pick(thirdParties)} yesterday, it was great.`,
  () => `We ordered ${pick(foods)} again, I'm hooked.`,
  () => `${pick(thirdParties)} says their ${pick(pets)} keeps escaping the yard.`,
  () => `My cousin wants a ${pick(pets)} but her landlord says no.`,
  () => `Have you ever been to ${pick(countries)}? ${pick(thirdParties)} keeps recommending it.`,
  () => `${pick(thirdParties)} posted photos from ${pick(countries)}, looks amazing.`,
  () => `My neighbour works as a ${pick(jobs)} at ${pick(companies)}, long hours.`,
  () => `${pick(thirdParties)} just started as a ${pick(jobs)} somewhere downtown.`,
  () => `${pick(thirdParties)} is learning the ${pick(instruments)}, slowly.`,
  () => `There was a street band with a ${pick(instruments)} outside the station today.`,
  () => `The weather in ${pick(cities)} looked awful on the news.`,
  () => `${pick(thirdParties)}'s sister is moving to ${pick(cities)} apparently.`,
  () => `I keep meaning to call my cousin, maybe this weekend.`,
  () => `Ha, that reminds me of something ${pick(thirdParties)} told me.`,
  () => `Did you watch the match last night? What a finish.`,
  () => `I need a holiday soon, work has been a lot.`,
  () => `The bus was late again, third time this week.`,
  () => `I started a new podcast about old shipwrecks, oddly relaxing.`,
  () => `We tried a board game night, chaos but fun.`,
  () => `My plants are finally recovering after the heatwave.`,
];

/**
 * Chit-chat between the two, reusing the questions' words about other people and things: a greeting,
 * a bit of news or a reaction, sometimes two, so few lines repeat word for word.
 */
function filler(speaker: string, other: string): string {
  void speaker;
  const roll = random();
  const parts =
    roll < 0.15
      ? [pick(greetings)]
      : roll < 0.3
        ? [pick(reactions)]
        : roll < 0.55
          ? [pick(reactions), pick(fillerTopics)()]
          : roll < 0.7
            ? [pick(greetings), pick(fillerTopics)()]
            : [pick(fillerTopics)()];
  return parts.join(" ").replaceAll("OTHER", other);
}

interface Turn {
  readonly id: string;
  readonly speaker: string;
  readonly text: string;
}

interface Session {
  readonly id: number;
  readonly date: string;
  readonly turns: Turn[];
}

interface Question {
  readonly question: string;
  readonly answer: string;
  readonly category: "single-hop" | "multi-hop" | "temporal";
  readonly evidence: string[];
}

/** A planted exchange: turns to place in one session; `evidence` indexes into them. */
interface Plant {
  readonly session: number;
  readonly turns: { speaker: string; text: string }[];
  readonly evidence: number[];
  readonly question?: Omit<Question, "evidence">;
  /** Filled in when placed. */
  ids?: string[];
}

const sessionCount = 24;

/** The facts one speaker's plants are about, picked in a fixed order (the seeded stream depends on it). */
interface Facts {
  readonly pet: string;
  readonly petName: string;
  readonly job: string;
  readonly company: string;
  readonly country: string;
  readonly sister: string;
  readonly instrument: string;
  readonly friend: string;
  readonly city: string;
  readonly achievement: string;
}

function pickFacts(): Facts {
  const pet = pick(pets);
  const petName = pick(petNames);
  const job = pick(jobs);
  const company = pick(companies);
  const country = pick(countries);
  const sister = pick(thirdParties);
  const instrument = pick(instruments);
  const friend = pickOther(thirdParties, sister);
  const city = pick(cities);
  const achievement = pick(achievements);
  return { pet, petName, job, company, country, sister, instrument, friend, city, achievement };
}

/** A session no plant of this conversation has taken yet (taken now). */
function sessionPicker(usedSessions: Set<number>): () => number {
  return () => {
    for (;;) {
      const session = Math.floor(random() * sessionCount);
      if (!usedSessions.has(session)) {
        usedSessions.add(session);
        return session;
      }
    }
  };
}

/** The answer is a reply; the question's words are in the other speaker's turn before it. */
function petPlant(self: string, other: string, { pet, petName }: Facts, free: () => number): Plant {
  return {
    session: free(),
    turns: [
      {
        speaker: self,
        text: pick([
          `Big news: we adopted a ${pet} from the shelter on Saturday!`,
          `We finally brought home a ${pet} last weekend!`,
          `Meet the newest member of the family: a little ${pet}!`,
        ]),
      },
      {
        speaker: other,
        text: pick([
          `No way, congratulations! Did you pick a name yet?`,
          `Aww! What are you calling him?`,
          `That's wonderful. Does he have a name?`,
        ]),
      },
      {
        speaker: self,
        text: pick([
          `Yes, ${petName}! It suits him, he already answers to it.`,
          `${petName}. The kids chose it and it stuck.`,
          `We went with ${petName}, it just fit.`,
        ]),
      },
    ],
    evidence: [2],
    question: { question: `What did ${self} name the ${pet}?`, answer: petName, category: "single-hop" },
  };
}

function jobPlant(self: string, other: string, { job, company }: Facts, free: () => number): Plant {
  return {
    session: free(),
    turns: [
      {
        speaker: other,
        text: pick([
          `How is the new job going, ${self}?`,
          `How are things at work these days, ${self}?`,
          `${self}, how's the new gig treating you?`,
        ]),
      },
      {
        speaker: self,
        text: pick([
          `I love it. Being a ${job} at ${company} is exactly what I hoped for.`,
          `Honestly great. ${company} treats its people well, and I like being a ${job} there.`,
          `Busy! I'm the only ${job} on my team at ${company}.`,
        ]),
      },
    ],
    evidence: [1],
    question: { question: `Where does ${self} work?`, answer: company, category: "single-hop" },
  };
}

function tripPlant(self: string, other: string, { country }: Facts, free: () => number): Plant {
  const tripSession = free();
  return {
    session: tripSession,
    turns: [
      {
        speaker: self,
        text: pick([
          `I just got back from ${country} yesterday, still jet-lagged.`,
          `Back from two weeks in ${country}! My suitcase is still packed.`,
          `${country} was incredible, I only landed last night.`,
        ]),
      },
      { speaker: other, text: pick([`Welcome back! I want to hear everything.`, `Oh, photos please!`]) },
    ],
    evidence: [0],
    question: {
      question: `When did ${self} go to ${country}?`,
      answer: "SESSION_DATE",
      category: "temporal",
    },
  };
}

function achievementPlant(self: string, other: string, { achievement }: Facts, free: () => number): Plant {
  const achievementSession = free();
  return {
    session: achievementSession,
    turns: [
      {
        speaker: self,
        text: pick([
          `Guess what, I finally ${achievement} this weekend!`,
          `Big moment for me: I ${achievement} on Saturday.`,
          `So proud, I ${achievement} at last!`,
        ]),
      },
      { speaker: other, text: pick([`That's amazing, you worked so hard for it.`, `Wow, well done!`]) },
    ],
    evidence: [0],
    // Filled with the session's month when dates are known.
    question: {
      question: `What did ${self} accomplish in MONTH?`,
      answer: achievement,
      category: "temporal",
    },
  };
}

/** Two hops, two sessions: who the sister is, then what she plays (the second turn names only her). */
function sisterPlants(self: string, { sister, instrument }: Facts, free: () => number): Plant[] {
  const firstHop = free();
  const secondHop = free();
  const first: Plant = {
    session: Math.min(firstHop, secondHop),
    turns: [
      {
        speaker: self,
        text: pick([
          `My sister ${sister} is staying with us for a few days.`,
          `${sister}, my little sister, is visiting this week.`,
          `My sister ${sister} flew in yesterday, the house is full.`,
        ]),
      },
    ],
    evidence: [0],
  };
  const second: Plant = {
    session: Math.max(firstHop, secondHop),
    turns: [
      {
        speaker: self,
        text: pick([
          `${sister} played her ${instrument} at the recital, the whole room went quiet.`,
          `We went to hear ${sister} play the ${instrument} on Friday.`,
          `${sister} has been practising her ${instrument} for the concert all week.`,
        ]),
      },
    ],
    evidence: [0],
    question: {
      question: `What instrument does ${self}'s sister play?`,
      answer: instrument,
      category: "multi-hop",
    },
  };
  return [first, second];
}

/** Two hops again: who the friend from the running club is, then where she is moving. */
function friendPlants(self: string, { friend, city }: Facts, free: () => number): Plant[] {
  const friendFirst = free();
  const friendSecond = free();
  const first: Plant = {
    session: Math.min(friendFirst, friendSecond),
    turns: [
      {
        speaker: self,
        text: pick([
          `I joined a running club, and ${friend} from the club is now a good friend.`,
          `${friend}, who I met at my running club, has become a close friend.`,
        ]),
      },
    ],
    evidence: [0],
  };
  const second: Plant = {
    session: Math.max(friendFirst, friendSecond),
    turns: [
      {
        speaker: self,
        text: pick([
          `Sad news, ${friend} is moving to ${city} next month.`,
          `${friend} got an offer in ${city}, so she's moving away.`,
          `${friend} is relocating to ${city} soon, I'll miss our runs.`,
        ]),
      },
    ],
    evidence: [0],
    question: {
      question: `Which city is ${self}'s friend from the running club moving to?`,
      answer: city,
      category: "multi-hop",
    },
  };
  return [first, second];
}

/** One speaker's plants, in the order their random draws were first made (the shipped file depends on it). */
function planFor(self: string, other: string, usedSessions: Set<number>): Plant[] {
  const free = sessionPicker(usedSessions);
  const facts = pickFacts();
  return [
    petPlant(self, other, facts, free),
    jobPlant(self, other, facts, free),
    tripPlant(self, other, facts, free),
    achievementPlant(self, other, facts, free),
    ...sisterPlants(self, facts, free),
    ...friendPlants(self, facts, free),
  ];
}

function conversation(index: number) {
  const a = speakers[(index * 2) % speakers.length]!;
  const b = speakers[(index * 2 + 1) % speakers.length]!;
  const used = new Set<number>();
  const plants = [...planFor(a, b, used), ...planFor(b, a, used)];
  let time = Date.parse(`2023-0${1 + (index % 6)}-0${1 + (index % 9)}T18:00:00Z`);
  const sessions: Session[] = [];
  for (let s = 0; s < sessionCount; s += 1) {
    time += (6 + Math.floor(random() * 12)) * 86_400_000;
    const turns: Turn[] = [];
    const here = plants.filter((plant) => plant.session === s);
    const length = 14 + Math.floor(random() * 9);
    const slots = new Map<number, Plant>();
    for (const plant of here) {
      let slot: number;
      do slot = 1 + Math.floor(random() * (length - 2));
      while (slots.has(slot));
      slots.set(slot, plant);
    }
    let speaker = random() < 0.5 ? a : b;
    for (let t = 0; t < length; t += 1) {
      const plant = slots.get(t);
      if (plant) {
        plant.ids = [];
        for (const turn of plant.turns) {
          const id = `D${s + 1}:${turns.length + 1}`;
          plant.ids.push(id);
          turns.push({ id, speaker: turn.speaker, text: turn.text });
          speaker = turn.speaker === a ? b : a;
        }
        continue;
      }
      turns.push({
        id: `D${s + 1}:${turns.length + 1}`,
        speaker,
        text: filler(speaker, speaker === a ? b : a),
      });
      speaker = speaker === a ? b : a;
    }
    sessions.push({ id: s + 1, date: new Date(time).toISOString(), turns });
  }
  const questions: Question[] = [];
  for (const [at, plant] of plants.entries()) {
    if (!plant.question) continue;
    let { question } = plant.question;
    if (question.includes("MONTH")) {
      const date = new Date(sessions[plant.session]!.date);
      question = question.replace("MONTH", `${monthNames[date.getUTCMonth()]} ${date.getUTCFullYear()}`);
    }
    const answer =
      plant.question.answer === "SESSION_DATE"
        ? `shortly before ${sessions[plant.session]!.date.slice(0, 10)}`
        : plant.question.answer;
    const evidence = plant.evidence.map((position) => plant.ids![position]!);
    if (plant.question.category === "multi-hop") {
      // The first hop is the plant before it (same speaker, an earlier session).
      const first = plants[at - 1]!;
      evidence.unshift(...first.evidence.map((position) => first.ids![position]!));
    }
    questions.push({ ...plant.question, question, answer, evidence });
  }
  return {
    id: `dialogue-${index + 1}`,
    speakers: [a, b],
    split: index % 2 === 0 ? "dev" : "held-out",
    sessions,
    questions,
  };
}

const conversations = Array.from({ length: 12 }, (_, index) => conversation(index));
console.log(JSON.stringify({ conversations }, null, 1));
