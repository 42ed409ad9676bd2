/**
 * The session prior as properties over random conversations (ADR 0526): sessions against an oracle
 * that walks each scope's memories by itself, scores bounded and relative, and a lift that only ever
 * reorders the hits it is given.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import fc from "fast-check";
import type { StoredMemory } from "../store/memory-store.ts";
import { snapshotOf } from "./scope-snapshot.ts";
import { liftBySession, sessionPause, sessionScores, sessionsOf } from "./session-prior.ts";

const words = ["lisbon", "trip", "dog", "tarts", "dentist", "band", "gig", "shift"];

/** Memories in write order: each in one of three sessions ids (scopes), a pause before it, a few words. */
const conversation = fc.array(
  fc.record({
    scope: fc.constantFrom("a", "b", "c"),
    // Pauses around the bound, exactly at it, and steps back in time (turns imported later).
    pauseMinutes: fc.oneof(
      fc.integer({ min: 0, max: 90 }),
      fc.constant(30),
      fc.integer({ min: -90, max: -1 }),
    ),
    text: fc.array(fc.constantFrom(...words), { minLength: 1, maxLength: 6 }),
  }),
  { minLength: 1, maxLength: 60 },
);

function memoriesOf(drawn: { scope: string; pauseMinutes: number; text: string[] }[]): StoredMemory[] {
  let at = Date.parse("2024-01-01T00:00:00Z");
  return drawn.map(({ scope, pauseMinutes, text }, index) => {
    at += pauseMinutes * 60_000;
    return {
      id: `m${index}`,
      userId: "u",
      sessionId: scope,
      kind: "episode",
      content: text.join(" "),
      metadata: {},
      createdAt: new Date(at).toISOString(),
    } as unknown as StoredMemory;
  });
}

it("sessions are each scope's runs without a pause (or a step back) over the bound (against an oracle)", () => {
  fc.assert(
    fc.property(conversation, (drawn) => {
      const memories = memoriesOf(drawn);
      const { of, lengths } = sessionsOf(snapshotOf(memories));
      // Oracle: two memories share a session iff one scope holds both and no pause between
      // consecutive memories of that scope, from the first to the second, is over the bound.
      for (let left = 0; left < memories.length; left += 1) {
        for (let right = left + 1; right < memories.length; right += 1) {
          const a = memories[left]!;
          const b = memories[right]!;
          let same = a.sessionId === b.sessionId;
          let previous = a;
          for (let between = left + 1; same && between <= right; between += 1) {
            const memory = memories[between]!;
            if (memory.sessionId !== a.sessionId) continue;
            if (Math.abs(Date.parse(memory.createdAt) - Date.parse(previous.createdAt)) > sessionPause)
              same = false;
            previous = memory;
          }
          assert.equal(of[left] === of[right], same, `m${left} and m${right}`);
        }
      }
      assert.equal(Math.max(...of) + 1, lengths.length, "sessions are numbered densely");
    }),
    { numRuns: 2_000 },
  );
});

it("session scores lie in 0..1, the best is 1, and a session without the words scores 0", () => {
  fc.assert(
    fc.property(conversation, fc.subarray(words, { minLength: 1 }), (drawn, query) => {
      const snapshot = snapshotOf(memoriesOf(drawn));
      const { of, lengths } = sessionsOf(snapshot);
      const scores = sessionScores(snapshot, query);
      assert.equal(scores.length, lengths.length);
      const holds = new Set<number>();
      snapshot.memories.forEach((memory, position) => {
        if (query.some((word) => memory.content.split(" ").includes(word))) holds.add(of[position]!);
      });
      for (const [session, score] of scores.entries()) {
        assert.ok(score >= 0 && score <= 1, `score ${score}`);
        if (!holds.has(session)) assert.equal(score, 0, `session ${session} holds none of ${query}`);
      }
      if (lengths.length < 2)
        assert.ok(
          scores.every((score) => score === 0),
          "one session: nothing to lift",
        );
      else if (holds.size > 0) assert.equal(Math.max(...scores), 1, "the best session scores 1");
    }),
    { numRuns: 2_000 },
  );
});

it("the lift only reorders the hits: the same memories, none lower, none lifted past the bound", () => {
  fc.assert(
    fc.property(
      conversation,
      fc.subarray(words, { minLength: 1 }),
      fc.array(fc.double({ min: 0.01, max: 20, noNaN: true }), { minLength: 1, maxLength: 60 }),
      (drawn, query, rawScores) => {
        const snapshot = snapshotOf(memoriesOf(drawn));
        const hits = snapshot.memories
          .slice(0, rawScores.length)
          .map((memory, index) => ({ memory, score: rawScores[index]! }));
        const lifted = liftBySession(hits, snapshot, query);
        assert.deepEqual(lifted.map((hit) => hit.memory.id).sort(), hits.map((hit) => hit.memory.id).sort());
        const top = Math.max(...hits.map((hit) => hit.score));
        const before = new Map(hits.map((hit) => [hit.memory.id, hit.score]));
        for (const hit of lifted) {
          const gain = hit.score - before.get(hit.memory.id)!;
          assert.ok(gain >= 0 && gain <= 0.3 * top + 1e-9, `gain ${gain} of a top ${top}`);
        }
        for (let index = 1; index < lifted.length; index += 1)
          assert.ok(lifted[index - 1]!.score >= lifted[index]!.score, "best first");
      },
    ),
    { numRuns: 2_000 },
  );
});
