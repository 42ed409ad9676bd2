/**
 * The pieces of `keyed-calls.property.test.ts`: a round's random calls, and the oracle that judges
 * what they answered and what effects they left (one line per run of the `effects` fixture's tool).
 */
import assert from "node:assert/strict";
import type { ToolCallResult } from "@tackle/core";

/** `A` is a key's own arguments, `B` other arguments under it, `F` ones that fail retryably; `U` has no key. */
export type Variant = "A" | "B" | "F" | "U";

export interface PlannedCall {
  readonly key: string | undefined;
  readonly variant: Variant;
  readonly args: { readonly file: string; readonly id: string; readonly ms: number; readonly fail?: true };
  readonly client: number;
  /** When the caller aborts it (ms after sending), if it does. */
  readonly abortAfterMs: number | undefined;
  /** A time limit short enough that a repeat may stop waiting, or the run may be cut off. */
  readonly timeoutMs: number | undefined;
}

export interface AnsweredCall extends PlannedCall {
  readonly answer: ToolCallResult;
}

/** A line of the effects file: `<id> <node> <key>`, and `takeover <node>` when a takeover ran it. */
export interface Effect {
  readonly id: string;
  readonly node: string;
  readonly key: string;
  /** The node whose run under the key this one took over (ADR 0213), if it was a takeover. */
  readonly takeover?: string;
}

export function parseEffects(text: string): Effect[] {
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [id, node, key, told, earlier] = line.split(" ");
      const effect = { id: id as string, node: node as string, key: key as string };
      return told === "takeover" ? { ...effect, takeover: earlier as string } : effect;
    });
}

/** The arguments of `variant` under `key` in this round: the same object every time it is drawn. */
export function argsOf(file: string, key: string, variant: Variant, ms: number): PlannedCall["args"] {
  if (variant === "F") return { file, id: `${key}-F`, ms, fail: true };
  return { file, id: `${key}-${variant}`, ms };
}

/**
 * 4–12 calls over 1–3 fresh keys: mostly the key's own arguments repeated, now and then other
 * arguments or failing ones under the key, some without a key; some aborted by their caller at a
 * random moment, some with a time limit of a few ms.
 */
export function planRound(random: () => number, round: number, file: string, clients: number): PlannedCall[] {
  const pick = (n: number) => Math.floor(random() * n);
  const keys = Array.from({ length: 1 + pick(3) }, (_, index) => `r${round}k${index}`);
  // Each key's wait (0–40 ms), per variant: a repeat carries exactly the same arguments.
  const waits = new Map(
    keys.flatMap((key) => (["A", "B", "F"] as const).map((v) => [`${key}-${v}`, pick(41)])),
  );
  const count = 4 + pick(9);
  return Array.from({ length: count }, (_, index): PlannedCall => {
    const roll = random();
    const abortAfterMs = random() < 0.15 ? pick(50) : undefined;
    const timeoutMs = random() < 0.08 ? 2 + pick(30) : undefined;
    const client = pick(clients);
    if (roll < 0.12) {
      const args = { file, id: `r${round}u${index}`, ms: pick(41) };
      return { key: undefined, variant: "U", args, client, abortAfterMs, timeoutMs };
    }
    const key = keys[pick(keys.length)] as string;
    const variant: Variant = roll < 0.74 ? "A" : roll < 0.86 ? "B" : "F";
    const args = argsOf(file, key, variant, waits.get(`${key}-${variant}`) as number);
    return { key, variant, args, client, abortAfterMs, timeoutMs };
  });
}

export interface Counts {
  calls: number;
  ok: number;
  reused: number;
  failed: number;
  aborted: number;
  timedOut: number;
  stillRunning: number;
  keys: number;
  keysRunInRound: number;
  probesRan: number;
}

export function newCounts(): Counts {
  return {
    calls: 0,
    ok: 0,
    reused: 0,
    failed: 0,
    aborted: 0,
    timedOut: 0,
    stillRunning: 0,
    keys: 0,
    keysRunInRound: 0,
    probesRan: 0,
  };
}

/** Judges an error answer: throws when the code does not fit the call (`checkError` is the default). */
export type ErrorJudge = (
  call: AnsweredCall,
  variants: ReadonlySet<Variant>,
  describe: string,
  counts: Counts,
) => void;

/** The error codes the node and its results ledger may answer a call, and when (keyed-once.ts). */
export function checkError(
  call: AnsweredCall,
  variants: ReadonlySet<Variant>,
  describe: string,
  counts: Counts,
): void {
  const { answer } = call;
  if (answer.ok) return;
  const { code, data } = answer.error as { code: string; data?: { running?: boolean } };
  const why = `${describe}: ${JSON.stringify({ call: { ...call, answer: undefined }, answer })}`;
  switch (code) {
    case "idempotency_key_reused":
      // Only under a key that held other arguments in this round.
      assert.ok(call.key !== undefined && variants.size > 1, why);
      counts.reused += 1;
      return;
    case "unavailable":
      // The fixture's retryable failure; the ledger stays reachable throughout.
      assert.equal(call.variant, "F", why);
      counts.failed += 1;
      return;
    case "aborted":
      // Only a call its own caller aborted: another caller's cancel is not this call's answer.
      assert.ok(call.abortAfterMs !== undefined, why);
      counts.aborted += 1;
      return;
    case "timeout":
      // Only a call with a short time limit: a repeat that stopped waiting (data.running) or a cut-off run.
      assert.ok(call.timeoutMs !== undefined, why);
      if (data?.running === true) counts.stillRunning += 1;
      counts.timedOut += 1;
      return;
    default:
      assert.fail(`unexpected code ${code}: ${why}`);
  }
}

/**
 * The oracle for a round's answers, given the effects the file holds once every key settled: per key
 * at most one effect, by its own or its other arguments (never the failing ones); if any call under
 * it answered ok, exactly one, and every ok answer is that run's output; a call without a key that
 * nobody cut short ran once and answered its own run. Under broker faults (`faults`) the errors are
 * judged by `faults.judge`, and a call without a key may fail as it says, running at most once.
 */
export function checkRound(
  calls: readonly AnsweredCall[],
  effects: readonly Effect[],
  describe: string,
  counts: Counts,
  faults?: { readonly judge: ErrorJudge },
): void {
  const judge = faults?.judge ?? checkError;
  const keys = new Set(calls.flatMap((call) => (call.key === undefined ? [] : [call.key])));
  for (const key of keys) {
    const under = calls.filter((call) => call.key === key);
    const variants = new Set(under.map((call) => call.variant));
    const lines = effects.filter((effect) => effect.key === key);
    const why = `${describe}: key ${key}: effects ${JSON.stringify(lines)}, answers ${JSON.stringify(under.map((c) => [c.variant, c.abortAfterMs, c.timeoutMs, c.answer]))}`;
    assert.ok(lines.length <= 1, `ran more than once: ${why}`);
    const [line] = lines;
    if (line !== undefined) assert.ok(/-[AB]$/.test(line.id), `a failing call made an effect: ${why}`);
    const oks = under.filter((call) => call.answer.ok);
    if (oks.length > 0) assert.equal(lines.length, 1, `answered ok without an effect: ${why}`);
    for (const call of oks) {
      assert.equal(call.args.id, line?.id, `ok for arguments that did not run: ${why}`);
      assert.deepEqual(call.answer, { ok: true, output: { id: line?.id, node: line?.node } }, why);
    }
    for (const call of under) judge(call, variants, describe, counts);
    counts.ok += oks.length;
    counts.keys += 1;
    if (line !== undefined) counts.keysRunInRound += 1;
  }
  for (const call of calls.filter((each) => each.key === undefined)) {
    const lines = effects.filter((effect) => effect.id === call.args.id);
    const why = `${describe}: unkeyed ${call.args.id}: ${JSON.stringify({ lines, answer: call.answer })}`;
    assert.ok(lines.length <= 1, why);
    if (call.abortAfterMs === undefined && call.timeoutMs === undefined && faults === undefined) {
      assert.equal(lines.length, 1, why);
      assert.deepEqual(call.answer, { ok: true, output: { id: call.args.id, node: lines[0]?.node } }, why);
      counts.ok += 1;
    } else if (call.answer.ok) {
      assert.deepEqual(call.answer, { ok: true, output: { id: call.args.id, node: lines[0]?.node } }, why);
      counts.ok += 1;
    } else judge(call, new Set(["U"]), describe, counts);
  }
  counts.calls += calls.length;
}

/** How a probe calls a key with arguments, reads a round's effects, and how long it may take. */
export interface ProbeSite {
  readonly call: (args: PlannedCall["args"], key: string, timeoutMs: number) => Promise<ToolCallResult>;
  readonly effectsIn: (file: string) => Effect[];
  readonly probeMs: number;
}

/**
 * Asks `key` once more with its arguments (the ones that ran, or its own when none did), retrying
 * retryable answers until `site.probeMs`: it answers ok, and the file then holds exactly one effect
 * under the key, which the answer is. A key whose run lands late (a call aborted before it reached a
 * node arrives after) may refuse the key's own arguments for a moment: asked again, by what then ran.
 * Returns whether the probe ran the tool (the key had no effect before).
 */
export async function probe(
  site: ProbeSite,
  key: string,
  file: string,
  calls: readonly PlannedCall[],
  describe: string,
): Promise<boolean> {
  const until = Date.now() + site.probeMs;
  let last: ToolCallResult | undefined;
  while (Date.now() < until) {
    const before = site.effectsIn(file).filter((effect) => effect.key === key);
    assert.ok(before.length <= 1, `${describe}: ${key} ran more than once: ${JSON.stringify(before)}`);
    const variant = before[0]?.id.endsWith("-B") ? "B" : "A";
    const args =
      calls.find((call) => call.key === key && call.variant === variant)?.args ?? argsOf(file, key, "A", 0);
    last = await site.call(args, key, Math.max(1, until - Date.now()));
    if (last.ok) {
      const lines = site.effectsIn(file).filter((effect) => effect.key === key);
      const why = `${describe}: probe of ${key}: ${JSON.stringify({ before, lines, last })}`;
      assert.equal(lines.length, 1, why);
      assert.deepEqual(last.output, { id: lines[0]?.id, node: lines[0]?.node }, why);
      if (before.length === 1) assert.deepEqual(lines, before, why);
      return before.length === 0;
    }
    const late = last.error.code === "idempotency_key_reused" && before.length === 0;
    if (!last.error.retryable && !late) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return assert.fail(`${describe}: probe of ${key} did not answer its run: ${JSON.stringify(last)}`);
}
