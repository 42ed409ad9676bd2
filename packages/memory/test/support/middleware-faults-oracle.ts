/**
 * The oracle of `middleware-faults.property.test.ts`: what must hold for every model call whatever
 * the relay did to the memory service under it.
 */
import assert from "node:assert/strict";
import { MemoryMiddlewareError } from "../../src/middleware/memory-middleware-error.ts";
import { estimateTokens } from "../../src/service/text.ts";
import { type FaultyMemory, OWNER_MARK, ownerTag, secretOf, type Tenant } from "./middleware-faults.ts";
import { isModelError, replyTo, type Turn } from "./middleware-faults-callers.ts";

export interface Bounds {
  /** The most one call may take: its model, the memory budgets (context + capture), slack. */
  readonly callMs: (turn: Turn) => number;
  readonly tokenBudget: number;
  /** Every (tenant, user) of the run, for the secrets that must not cross over. */
  readonly owners: readonly { readonly tenant: Tenant; readonly user: string }[];
}

/** Each call: its own answer or its own model error, in time, and only its user's memory injected. */
export function checkCall(turn: Turn, bounds: Bounds): void {
  const name = `${turn.callId} (${turn.via}, ${turn.tenant}/${turn.user}/${turn.session})`;
  assert.ok(turn.elapsedMs! <= bounds.callMs(turn), `${name} took ${Math.round(turn.elapsedMs!)} ms`);
  if (turn.modelFails)
    assert.ok(isModelError(turn), `${name} failed with the model's error: ${String(turn.thrown)}`);
  else {
    assert.equal(turn.thrown, undefined, `${name} never fails for memory: ${String(turn.thrown)}`);
    assert.equal(turn.reply, replyTo(turn.userText), `${name} answered`);
  }
  for (const error of turn.errors) {
    assert.ok(MemoryMiddlewareError.isInstance(error), `${name} reported a MemoryMiddlewareError`);
    assert.ok(
      error.code === "memory_context_failed" || error.code === "memory_capture_failed",
      `${name} reported ${error.code}`,
    );
  }
  assert.equal(turn.logged.length, turn.errors.length, `${name}: one log line per failure`);
  const own = ownerTag(turn.tenant, turn.user);
  const saw = turn.saw ?? "";
  for (const mark of saw.match(OWNER_MARK) ?? [])
    assert.equal(mark, own, `${name} saw only its user's memory`);
  for (const { tenant, user } of bounds.owners) {
    if (tenant !== turn.tenant || user !== turn.user)
      assert.ok(!saw.includes(secretOf(tenant, user)), `${name} saw ${tenant}/${user}'s secret`);
  }
  const block = /<<<BEGIN_UNTRUSTED_MEMORY_CONTEXT[^\n]*\n([\s\S]*?)<<<END_UNTRUSTED_MEMORY_CONTEXT/.exec(
    saw,
  );
  if (block !== null) {
    // The service counts each item's text on its own (four characters a token, rounded up).
    const items: string[][] = [];
    for (const line of block[1]!.split("\n")) {
      if (!line.startsWith("  ")) items.push([]);
      else items.at(-1)?.push(line.slice(2));
    }
    const tokens = items.reduce((sum, lines) => sum + estimateTokens(lines.join("\n")), 0);
    assert.ok(tokens <= bounds.tokenBudget, `${name} got ${tokens} tokens`);
  }
}

/**
 * Captures: each turn stored at most once however often it was tried, exactly once when an attempt
 * answered with no capture failure reported, never when the model failed, and only in its own scope.
 */
export async function checkCaptures(memory: FaultyMemory, turns: readonly Turn[]): Promise<void> {
  const byCall = new Map<string, Turn[]>();
  for (const turn of turns) byCall.set(turn.callId, [...(byCall.get(turn.callId) ?? []), turn]);
  const scopes = new Map<string, Turn>();
  for (const turn of turns) scopes.set(`${turn.tenant}/${turn.user}/${turn.session}`, turn);
  for (const { tenant, user, session } of scopes.values()) {
    const events = await memory.events(tenant, user, session);
    const mine = new Set(
      turns.filter((turn) => turn.tenant === tenant && turn.user === user && turn.session === session),
    );
    for (const event of events) {
      const owner = [...mine].find(
        (turn) => event.content === turn.userText || event.content === replyTo(turn.userText),
      );
      assert.ok(
        owner !== undefined,
        `${tenant}/${user}/${session} holds only its own turns: ${event.content}`,
      );
    }
    for (const [callId, attempts] of byCall) {
      const first = attempts[0]!;
      if (!mine.has(first)) continue;
      const users = events.filter(
        (event) => event.role === "user" && event.content === first.userText,
      ).length;
      const answers = events.filter(
        (event) => event.role === "assistant" && event.content === replyTo(first.userText),
      ).length;
      const story = attempts.map(
        (turn) =>
          `${turn.via} thrown=${turn.thrown !== undefined} errors=${turn.errors.map((error) => error.code)}`,
      );
      assert.ok(users <= 1 && answers <= 1, `${callId} stored at most once: ${users}/${answers} ${story}`);
      const acknowledged = attempts.some(
        (turn) =>
          turn.thrown === undefined && !turn.errors.some((error) => error.code === "memory_capture_failed"),
      );
      if (acknowledged) assert.deepEqual([users, answers], [1, 1], `${callId} stored once: ${story}`);
      if (attempts.every((turn) => turn.thrown !== undefined))
        assert.deepEqual([users, answers], [0, 0], `${callId} failed: nothing captured`);
    }
  }
}
