/**
 * Generates the retrieval evaluation set in the shape of LoCoMo / LongMemEval: per user, dated
 * sessions of dialogue turns (`D<session>:<turn>` ids), and questions whose evidence turns are known.
 * Seeded, so the shipped file is reproducible:
 *   node_modules/.bin/node bench/memory/generate-eval-set.ts > bench/memory/eval/conversations.json
 * Categories: single-hop (one evidence turn), multi-hop (two), knowledge-update (the later turn is
 * the evidence; the earlier one is a trap), and paraphrase (few shared words with the evidence).
 * Each user is in the "dev" half (ranking is tuned on it) or the "held-out" half (reported, never tuned on).
 */

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

const random = mulberry32(20261129);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

const names = [
  "Priya",
  "Marco",
  "Lena",
  "Tomas",
  "Aiko",
  "Sam",
  "Noor",
  "Ivan",
  "Chloe",
  "Diego",
  "Freya",
  "Omar",
];
const pets = ["beagle", "tabby cat", "parrot", "corgi", "rabbit", "greyhound"];
const jobs = ["nurse", "data analyst", "carpenter", "teacher", "architect", "pharmacist", "pilot"];
const companies = ["Northwind", "Globex", "Initech", "Umbrella Labs", "Stark Foods", "Wayne Logistics"];
const cities = ["Denver", "Lisbon", "Osaka", "Toronto", "Edinburgh", "Melbourne", "Austin", "Bergen"];
const allergens = ["peanuts", "shellfish", "penicillin", "pollen", "gluten", "latex"];
const hobbies = ["pottery", "bouldering", "watercolor painting", "archery", "salsa dancing", "birdwatching"];
const instruments = ["cello", "violin", "piano", "trumpet", "banjo", "saxophone"];
const dishes = ["mushroom risotto", "chicken tikka masala", "pad thai", "beef bourguignon", "shakshuka"];
const countries = ["Iceland", "Portugal", "Vietnam", "Peru", "Morocco", "Norway", "Japan"];
const months = ["January", "March", "May", "July", "September", "November"];
const seasons = ["spring", "summer", "autumn", "winter"];

const chores = ["the garden", "my taxes", "laundry", "the garage", "emails", "meal prep", "the bike"];
const weekdays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"];

/** Chit-chat, and distractors that share the questions' words but answer none of them. */
const fillerTemplates: (() => string)[] = [
  () => `How was your weekend? I spent it on ${pick(chores)} with ${pick(names)}.`,
  () => `I spent ${1 + Math.floor(random() * 5)} hours on ${pick(chores)} on ${pick(weekdays)}.`,
  () => `The weather in ${pick(cities)} has been rainy all ${pick(seasons)}.`,
  () => `Can you recommend a book about ${pick(countries)} for ${pick(names)}?`,
  () => `My coworker ${pick(names)} says their company is hiring a ${pick(jobs)} again.`,
  () => `${pick(names)}'s sister is visiting ${pick(cities)} in ${pick(months)}.`,
  () => `I read that ${pick(allergens)} allergies are becoming more common among kids.`,
  () => `This weekend I might try ${pick(hobbies)} with ${pick(names)}, not sure yet.`,
  () => `${pick(names)} is a great ${pick(instruments)} teacher, according to my neighbor.`,
  () => `${pick(names)} cooked ${pick(dishes)} for the guests at the ${pick(seasons)} party.`,
  () => `${pick(names)} and her husband celebrated their anniversary in ${pick(countries)}.`,
  () => `${pick(names)} lives in ${pick(cities)} and loves the food there.`,
  () => `My friend ${pick(names)}'s brother got married in ${pick(months)}.`,
  () => `We might adopt a ${pick(pets)} someday, ${pick(names)} keeps asking.`,
  () => `${pick(names)} practices ${pick(instruments)} every ${pick(weekdays)} evening.`,
  () => `Traffic on ${pick(weekdays)} was terrible, an hour to get to work.`,
  () =>
    `I'm thinking about repainting the ${pick(["kitchen", "hallway", "bedroom", "office"])} in ${pick(seasons)}.`,
  () => `Do you know a good ${pick(["dentist", "plumber", "barber", "vet"])} near ${pick(cities)}?`,
];
const filler = () => pick(fillerTemplates)();
const replies = [
  "That sounds great, thanks for sharing!",
  "Got it, I'll keep that in mind.",
  "Interesting! Tell me more whenever you like.",
  "That's lovely to hear.",
  "Understood. Anything else on your mind?",
  "Oh nice, that must be exciting.",
];

interface Fact {
  readonly statement: string;
  readonly question: string;
  readonly answer: string;
  readonly category: "single-hop" | "paraphrase";
}

function facts(): Fact[] {
  const pet = pick(pets);
  const petName = pick(names);
  const job = pick(jobs);
  const company = pick(companies);
  const sister = pick(names);
  const sisterCity = pick(cities);
  const allergen = pick(allergens);
  const hobby = pick(hobbies);
  const instrument = pick(instruments);
  const teacher = pick(names);
  const dish = pick(dishes);
  const country = pick(countries);
  const month = pick(months);
  return [
    {
      statement: `We adopted a ${pet} called ${petName} from the shelter last ${pick(seasons)}.`,
      question: `What is the name of the ${pet} the user adopted?`,
      answer: petName,
      category: "single-hop",
    },
    {
      statement: `I started working as a ${job} at ${company} in ${pick(months)}.`,
      question: "Which company does the user work at?",
      answer: company,
      category: "single-hop",
    },
    {
      statement: `My sister ${sister} relocated to ${sisterCity} for a new position.`,
      question: "Which city did the user's sister move to?",
      answer: sisterCity,
      category: "paraphrase",
    },
    {
      statement: `I'm allergic to ${allergen}, so I always check the labels.`,
      question: "What allergy does the user have?",
      answer: allergen,
      category: "paraphrase",
    },
    {
      statement: `Lately I've been practicing ${hobby} every Saturday morning.`,
      question: "Which hobby does the user practice on weekends?",
      answer: hobby,
      category: "single-hop",
    },
    {
      statement: `I've been taking ${instrument} lessons with a teacher named ${teacher}.`,
      question: `Who teaches the user to play the ${instrument}?`,
      answer: teacher,
      category: "paraphrase",
    },
    {
      statement: `My favorite dish to cook for guests is ${dish}.`,
      question: "What does the user like cooking for guests?",
      answer: dish,
      category: "single-hop",
    },
    {
      statement: `In ${month} we're flying to ${country} to celebrate our anniversary.`,
      question: "Where is the user travelling for the anniversary celebration?",
      answer: country,
      category: "single-hop",
    },
  ];
}

interface Turn {
  readonly id: string;
  readonly speaker: "user" | "assistant";
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
  readonly category: string;
  readonly evidence: string[];
}

function conversation(index: number) {
  const sessionsCount = 10;
  const userFacts = facts();
  const brother = pick(names);
  const brotherJob = pick(jobs);
  const weddingMonth = pick(months);
  const firstCity = pick(cities);
  const secondCity = pick(cities.filter((city) => city !== firstCity));
  // Statements placed at (session, slot); each session holds ~10 user turns, each followed by a reply.
  const planned: { session: number; text: string; key: string }[] = [
    ...userFacts.map((fact, factIndex) => ({
      session: factIndex % sessionsCount,
      text: fact.statement,
      key: `fact-${factIndex}`,
    })),
    { session: 0, text: `We live in ${firstCity}, close to the river.`, key: "home-old" },
    { session: 8, text: `Big news: we moved again and now we live in ${secondCity}.`, key: "home-new" },
    { session: 1, text: `My brother ${brother} works as a ${brotherJob}.`, key: "brother-job" },
    { session: 6, text: `${brother} is getting married in ${weddingMonth}!`, key: "brother-wedding" },
  ];
  const start = Date.UTC(2025, 0, 6) + index * 86_400_000;
  const evidence = new Map<string, string>();
  const sessions: Session[] = [];
  for (let session = 0; session < sessionsCount; session += 1) {
    const userTurns = [
      ...planned.filter((item) => item.session === session),
      ...Array.from({ length: 14 }, () => ({ session, text: filler(), key: "" })),
    ].sort(() => random() - 0.5);
    const turns: Turn[] = [];
    for (const item of userTurns) {
      const id = `D${session + 1}:${turns.length + 1}`;
      turns.push({ id, speaker: "user", text: item.text });
      if (item.key) evidence.set(item.key, id);
      turns.push({ id: `D${session + 1}:${turns.length + 1}`, speaker: "assistant", text: pick(replies) });
    }
    sessions.push({ id: session + 1, date: new Date(start + session * 9 * 86_400_000).toISOString(), turns });
  }
  const questions: Question[] = [
    ...userFacts.map((fact, factIndex) => ({
      question: fact.question,
      answer: fact.answer,
      category: fact.category,
      evidence: [evidence.get(`fact-${factIndex}`)!],
    })),
    {
      question: "Which city does the user live in now?",
      answer: secondCity,
      category: "knowledge-update",
      evidence: [evidence.get("home-new")!],
    },
    {
      question: "When is the user's brother, the " + brotherJob + ", getting married?",
      answer: weddingMonth,
      category: "multi-hop",
      evidence: [evidence.get("brother-job")!, evidence.get("brother-wedding")!],
    },
  ];
  // The split is by user, alternating, and draws no random numbers, so the turns and questions are
  // exactly those generated before the split existed. Tune on "dev"; report "held-out" beside it.
  const split = index % 2 === 0 ? "dev" : "held-out";
  return { id: `user-${String(index + 1).padStart(2, "0")}`, split, sessions, questions };
}

const conversations = Array.from({ length: 24 }, (_, index) => conversation(index));
process.stdout.write(
  `${JSON.stringify(
    {
      name: "tackle-memory-eval",
      description:
        "Synthetic LoCoMo/LongMemEval-shaped set: dated sessions of turns per user; questions with known evidence turn ids.",
      seed: 20261129,
      conversations,
    },
    null,
    0,
  )}\n`,
);
