/**
 * Related words for the frames questions about a person's life are asked in, without a model: "Where
 * does Maya work?" is answered in a conversation by "How is the new job going?" — "Being a nurse at
 * Initech…", which hold no word of the question. Each entry maps words a question asks with to words
 * a conversation answers with: synonyms (work → job), and for a category the common members
 * (instrument → violin, piano). It goes one way: a question naming the violin asks for the violin, not
 * for every instrument. Hand-written for everyday conversation, kept small on purpose: a general
 * thesaurus lists dozens of senses per word ("work" → "go", "run", "play") and would flood the query.
 */
import { stem } from "../text/index-tokens.ts";

const relations: readonly (readonly [asked: string, related: string])[] = [
  // Occupation.
  [
    "work job career employ employer employed profession occupation workplace",
    "work job career office company employer boss colleague coworker shift hired promotion manager profession workplace",
  ],
  // Where someone lives, and moving.
  [
    "live lives living reside home hometown",
    "live house apartment flat moved neighbourhood neighborhood town city rent",
  ],
  ["move moved moving relocate", "moved moving relocate relocating house apartment city"],
  // Studies.
  [
    "study studies studying school education college university degree major",
    "study school college university degree class course major graduate graduated semester student",
  ],
  // Family and partners.
  ["kid kids child children", "kids children son daughter baby child"],
  ["family", "family mom dad mother father parents sister brother kids children husband wife"],
  ["parent parents", "parents mom dad mother father"],
  ["sibling siblings", "sister brother sibling"],
  ["partner spouse", "husband wife partner boyfriend girlfriend fiance"],
  // A wedding is an event: "getting married" asks for it, not for every husband and wife mentioned.
  ["married marry marriage wedding", "married wedding engaged engagement fiance"],
  ["friend friends", "friend friends buddy pal"],
  // Animals.
  [
    "pet pets animal animals",
    "pet dog puppy cat kitten bird parrot rabbit bunny hamster fish turtle horse adopted",
  ],
  // Things people play, do and like.
  [
    "instrument instruments",
    "instrument guitar piano violin cello drums flute trumpet saxophone ukulele harp banjo clarinet bass keyboard",
  ],
  [
    "sport sports exercise workout",
    "sport football soccer basketball tennis baseball volleyball running swimming cycling hiking yoga climbing gym",
  ],
  [
    "hobby hobbies activity activities pastime",
    "hobby painting drawing reading hiking camping pottery gardening cooking baking knitting photography writing dancing",
  ],
  ["art artwork", "art painting drawing sketch sculpture pottery canvas"],
  ["music", "music song songs band concert album singing guitar piano"],
  ["movie movies film films", "movie film cinema watched"],
  ["book books novel novels", "book novel reading read author"],
  ["food dish meal cuisine", "food dish meal recipe cooked cooking baked dinner lunch"],
  // Trips.
  [
    "trip trips travel traveled travelled vacation holiday visit visited",
    "trip travel vacation holiday visited flew flight journey abroad",
  ],
  // Health.
  ["health sick ill illness injury", "sick ill doctor hospital injury surgery health"],
  // "What did Maya name the beagle?" — "What are you calling him?"
  ["name named", "name named call called calling nickname"],
  ["car vehicle", "car drive drove truck vehicle"],
  ["birthday age", "birthday born"],
];

/** Stem of an asked word → the related words (as written, for the search and the coverage tests). */
const table = new Map<string, readonly string[]>();
for (const [asked, related] of relations) {
  const words = related.split(" ");
  for (const word of asked.split(" ")) {
    const key = stem(word);
    table.set(key, [...new Set([...(table.get(key) ?? []), ...words])]);
  }
}

/** The words related to a question's word (without the word itself), or none. */
export function relatedWords(word: string): readonly string[] {
  const lower = word.toLowerCase();
  return (table.get(stem(lower)) ?? []).filter((other) => stem(other) !== stem(lower));
}
