/**
 * The ledger of a caller's unsent answers (ADR 0552) against a plain oracle over 2,000 random
 * sequences: answers held on connections that drain, finish, close (in any order, more than once) or
 * were gone before the hold. Each place is given back exactly once, when its answer finishes or its
 * connection closes, and a caller's unsent bytes are always the sum of its held answers' buffers.
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { it } from "node:test";
import { seededRandom } from "@tackle/test-support";
import type { Outgoing } from "./unsent-answers.ts";
import { unsentAnswers } from "./unsent-answers.ts";

class FakeOutgoing extends EventEmitter implements Outgoing {
  writableLength: number;
  writableFinished = false;
  destroyed: boolean;
  socket: { destroyed: boolean; _handle: { writeQueueSize: number } } | null;
  constructor(length: number, gone: boolean) {
    super();
    this.writableLength = length;
    this.destroyed = gone;
    this.socket = { destroyed: gone, _handle: { writeQueueSize: length } };
  }
  destroy(): void {
    this.destroyed = true;
    this.emit("close");
  }
}

interface Held {
  readonly caller: string;
  readonly outgoing: FakeOutgoing;
  releases: number;
  /** Whether the oracle counts it as held (not finished, not closed, not gone at the hold). */
  open: boolean;
}

it("gives each place back once and counts unsent bytes as a plain sum, over 2,000 random sequences", () => {
  for (let seed = 1; seed <= 2_000; seed += 1) {
    const random = seededRandom(seed);
    const ledger = unsentAnswers({ stallMs: 3_600_000 });
    const callers = ["a", "b", "c"].slice(0, 1 + Math.floor(random() * 3));
    const held: Held[] = [];
    const steps = 10 + Math.floor(random() * 60);
    for (let step = 0; step < steps; step += 1) {
      const at = `seed ${seed}, step ${step}`;
      const roll = random();
      const some = held[Math.floor(random() * held.length)];
      if (held.length === 0 || roll < 0.4) {
        const caller = callers[Math.floor(random() * callers.length)] as string;
        const gone = random() < 0.1;
        const entry: Held = {
          caller,
          outgoing: new FakeOutgoing(Math.floor(random() * 10_000), gone),
          releases: 0,
          open: !gone,
        };
        held.push(entry);
        ledger.hold(caller, entry.outgoing, () => {
          entry.releases += 1;
        });
      } else if (some !== undefined && roll < 0.6) {
        // Drains part of its buffer.
        some.outgoing.writableLength = Math.floor(some.outgoing.writableLength * random());
      } else if (some !== undefined && roll < 0.8) {
        some.outgoing.writableLength = 0;
        some.outgoing.writableFinished = true;
        some.outgoing.emit("finish");
        some.open = false;
      } else if (some !== undefined) {
        some.outgoing.emit("close");
        some.open = false;
      }
      for (const entry of held) {
        assert.equal(entry.releases, entry.open ? 0 : 1, `${at}: a place given back ${entry.releases} times`);
      }
      for (const caller of callers) {
        const sum = held
          .filter((entry) => entry.open && entry.caller === caller)
          .reduce((total, entry) => total + entry.outgoing.writableLength, 0);
        assert.equal(ledger.bytes(caller), sum, `${at}: ${caller}'s unsent bytes`);
      }
    }
    for (const entry of held) entry.outgoing.emit("close");
    for (const caller of callers) assert.equal(ledger.bytes(caller), 0, `seed ${seed}: bytes left`);
    assert.ok(
      held.every((entry) => entry.releases === 1),
      `seed ${seed}: a place not given back once`,
    );
  }
});
