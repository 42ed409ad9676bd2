/**
 * Checks a hand-written set in eval/written.txt's format and prints each question beside the text of
 * its evidence turns, so whoever writes a set can read every label against the turn it names.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/memory/check-written.ts bench/memory/eval/written.txt [--quiet]
 */
import { readFileSync } from "node:fs";
import { parseWritten } from "./eval-sets.ts";

const [file, flag] = process.argv.slice(2);
if (file === undefined) throw new Error("usage: check-written.ts <file> [--quiet]");
const conversations = parseWritten(readFileSync(file, "utf8"));
let problems = 0;
const problem = (text: string) => {
  problems += 1;
  console.log(`PROBLEM ${text}`);
};
for (const conversation of conversations) {
  const turns = new Map(
    conversation.sessions.flatMap((session) => session.turns.map((turn) => [turn.id, turn])),
  );
  console.log(
    `= ${conversation.id} (${conversation.split}): ${conversation.sessions.length} sessions, ${turns.size} turns, ${conversation.questions.length} questions`,
  );
  for (const session of conversation.sessions) {
    if (Number.isNaN(Date.parse(session.date))) problem(`session ${session.id}: date "${session.date}"`);
    for (const turn of session.turns) {
      if (!conversation.speakers?.includes(turn.speaker)) problem(`${turn.id}: speaker "${turn.speaker}"`);
    }
  }
  for (const question of conversation.questions) {
    if (flag !== "--quiet") console.log(`\n? [${question.category}] ${question.question}`);
    for (const id of question.evidence) {
      const turn = turns.get(id);
      if (turn === undefined) problem(`"${question.question}": no turn ${id}`);
      else if (flag !== "--quiet") console.log(`  ${id} ${turn.speaker}: ${turn.text}`);
    }
  }
}
console.log(`\n${problems} problem(s)`);
process.exitCode = problems === 0 ? 0 : 1;
