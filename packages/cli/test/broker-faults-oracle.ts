/**
 * The oracle of `broker-faults.property.test.ts`: what each `effects.apply` answer says about the
 * call's effect, whatever the broker did meanwhile (mesh README, "Client failures"). `ok`, and
 * `reply_lost` whose outcome was `ok`, ran exactly once; `not_delivered`, `unavailable`, `unreachable`
 * and `no_responders` never ran; `node_lost`, `disconnected`, `timeout`, `aborted` (and a call its
 * client cancelled) may have run, at most once. No call runs twice; any other answer is a defect.
 */
import assert from "node:assert/strict";
import type { Answer } from "./broker-faults-support.ts";

const neverRan = new Set(["not_delivered", "unavailable", "unreachable", "no_responders"]);
const mayHaveRun = new Set(["node_lost", "disconnected", "timeout", "aborted", "reply_lost"]);

export interface Settled {
  readonly id: string;
  readonly client: string;
  readonly step: string;
  readonly answer: Answer;
  readonly ms: number;
}

/** Checks one answer as it comes: a documented code in the form `code: message`, nothing raw. */
export function checkAnswer(settled: Settled): void {
  const { answer, id, client, step } = settled;
  const where = `${id} via ${client} (${step})`;
  assert.notEqual(answer.kind, "thrown", `${where}: ${answer.kind === "thrown" ? answer.message : ""}`);
  if (answer.kind !== "error") return;
  assert.ok(
    neverRan.has(answer.code) || mayHaveRun.has(answer.code),
    `${where}: an undocumented answer ${answer.text}`,
  );
  assert.ok(answer.text.startsWith(`${answer.code}: `), `${where}: not a coded message: ${answer.text}`);
  assert.doesNotMatch(answer.text, /\n\s+at /, `${where}: a stack trace in the answer`);
}

/** The effects against every answer, once no call is in flight any more. */
export function checkEffects(settled: readonly Settled[], effects: ReadonlyMap<string, number>): void {
  const known = new Set(settled.map(({ id }) => id));
  for (const id of effects.keys()) assert.ok(known.has(id), `an effect of a call nobody made: ${id}`);
  for (const { id, client, step, answer } of settled) {
    const count = effects.get(id) ?? 0;
    const where = `${id} via ${client} (${step}), answered ${JSON.stringify(answer)}`;
    assert.ok(count <= 1, `${where}: ran ${count} times`);
    if (answer.kind === "ok") assert.equal(count, 1, `${where}: answered ok but made no effect`);
    if (answer.kind !== "error") continue;
    if (neverRan.has(answer.code)) assert.equal(count, 0, `${where}: said it never ran, but it ran`);
    const outcome = (answer.data as { outcome?: string } | undefined)?.outcome;
    if (answer.code === "reply_lost" && outcome === "ok")
      assert.equal(count, 1, `${where}: said it ran ok, but made no effect`);
  }
}
