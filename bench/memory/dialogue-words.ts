/** The words the dialogue set is made of (bench/memory/generate-dialogue-set.ts): names, facts and small talk. */

export const speakers = [
  "Maya",
  "Jonas",
  "Priya",
  "Caleb",
  "Ines",
  "Tobias",
  "Aiko",
  "Rafael",
  "Nora",
  "Felix",
  "Zara",
  "Mateo",
  "Leila",
  "Oskar",
  "Hana",
  "Dmitri",
  "Sofia",
  "Kwame",
  "Elif",
  "Arjun",
  "Greta",
  "Yusuf",
  "Clara",
  "Bruno",
];
export const thirdParties = [
  "Lena",
  "Marco",
  "Tess",
  "Ravi",
  "Ada",
  "Hugo",
  "Mira",
  "Emil",
  "Iris",
  "Nico",
  "Vera",
  "Sami",
];
export const pets = ["corgi", "tabby cat", "parrot", "beagle", "rabbit", "greyhound", "hamster"];
export const petNames = [
  "Pepper",
  "Biscuit",
  "Mochi",
  "Juniper",
  "Ziggy",
  "Olive",
  "Pickles",
  "Nacho",
  "Clover",
];
export const jobs = ["nurse", "data analyst", "carpenter", "teacher", "architect", "pharmacist", "baker"];
export const companies = [
  "Northwind",
  "Globex",
  "Initech",
  "Umbrella Labs",
  "Stark Foods",
  "Wayne Logistics",
  "Acme Health",
];
export const countries = ["Iceland", "Portugal", "Vietnam", "Peru", "Morocco", "Norway", "Japan", "Chile"];
export const cities = ["Denver", "Lisbon", "Osaka", "Toronto", "Edinburgh", "Melbourne", "Austin", "Bergen"];
export const instruments = ["cello", "violin", "piano", "trumpet", "banjo", "saxophone", "harp"];
export const achievements = [
  "ran my first half marathon",
  "finished building a bookshelf from scratch",
  "passed my driving test",
  "baked a three-tier wedding cake",
  "gave a talk at a local meetup",
  "planted a vegetable garden",
  "sold my first painting",
];
export const monthNames = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];
export const chores = ["the garden", "my taxes", "laundry", "the garage", "emails", "meal prep", "the bike"];
export const foods = ["ramen", "tacos", "curry", "pizza", "dumplings", "falafel"];

export const greetings = [
  "Hey OTHER, good to hear from you.",
  "Morning! Coffee in hand already?",
  "Long day today, OTHER?",
  "How did the weekend treat you?",
  "How was your week, OTHER?",
  "Sorry I went quiet, things got hectic.",
  "Finally some time to chat!",
];
export const reactions = [
  "That's so true.",
  "Ha, fair enough.",
  "Oh no, really?",
  "Wow, I didn't know that.",
  "Same here, honestly.",
  "Totally get that.",
  "Haha, classic.",
  "Makes sense to me.",
  "I feel the same way, OTHER.",
  "Anyway, how's everything with you?",
];
