/**
 * One runner's view of a store that several runners share, as one server process among several sees
 * it: calls reach the store a little late now and then (so racing runners interleave differently each
 * time), and the process can freeze — a GC pause, a stopped container, a network partition — at a
 * chosen call: its calls and the answers in flight wait until it thaws, while the other processes go
 * on. What lands is reported to the oracle as it lands.
 */
import { setTimeout as sleep, setImmediate as turn } from "node:timers/promises";
import { DurableError, type DurableStore } from "@tackle/durable";
import type { Oracle } from "./property-programs.ts";

export interface RacingStoreCounts {
  /** Writes the store refused `run_fenced`: a frozen driver writing after another took its run over. */
  fencedWrites: number;
}

export interface RacingStore {
  readonly store: DurableStore;
  /**
   * Freezes this process when it makes its `afterCalls`-th store call from now, for `ms` (or until
   * `thaw`); `onFreeze` is told when it does.
   */
  freezeAt(afterCalls: number, ms: number, onFreeze: () => void): void;
  /** Ends a freeze early; forgets a freeze armed but not begun. */
  thaw(): void;
  /** Called with each answer of `findStaleRuns` (a recovery sweep's look) before the runner hears it. */
  onStaleLook?: ((found: readonly string[]) => Promise<void>) | undefined;
}

/** With `TACKLE_PROPERTY_TRACE` set (replaying one seed), every store call and operation is printed. */
export function trace(line: string): void {
  if (process.env.TACKLE_PROPERTY_TRACE !== undefined) console.log(`# ${line}`);
}

const brief = (value: unknown) => (JSON.stringify(value) ?? "undefined").slice(0, 300);

/** The store as runner `name` sees it. */
export function racingStore(
  name: string,
  base: DurableStore,
  oracle: Oracle,
  random: () => number,
  counts: RacingStoreCounts,
): RacingStore {
  let calls = 0;
  let armed: { at: number; ms: number; onFreeze: () => void } | undefined;
  let frozen: { until: Promise<void>; end: () => void } | undefined;
  const freeze = (ms: number) => {
    let end!: () => void;
    const until = new Promise<void>((resolve) => {
      end = resolve;
    });
    const timer = setTimeout(() => thaw(), ms);
    frozen = {
      until,
      end: () => {
        clearTimeout(timer);
        end();
      },
    };
  };
  const thaw = () => {
    armed = undefined;
    const current = frozen;
    frozen = undefined;
    current?.end();
  };
  /** Waits out the freeze, if any (and any that begins while waiting). */
  const thawed = async () => {
    for (let until = frozen?.until; until !== undefined; until = frozen?.until) await until;
  };
  const latency = async () => {
    const pick = random();
    if (pick < 0.15) await turn();
    else if (pick < 0.2) await sleep(Math.floor(random() * 4));
  };
  const store = new Proxy(base, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || property === "close") return value;
      return async (...args: unknown[]) => {
        calls += 1;
        if (armed !== undefined && calls >= armed.at) {
          const { ms, onFreeze } = armed;
          armed = undefined;
          freeze(ms);
          onFreeze();
        }
        // Frozen before the call leaves the process: it reaches the store after the thaw.
        await thawed();
        await latency();
        let result: unknown;
        try {
          result = await (value as (...parameters: unknown[]) => Promise<unknown>).apply(target, args);
        } catch (error) {
          if (DurableError.isInstance(error) && error.code === "run_fenced") counts.fencedWrites += 1;
          trace(`${name} ${String(property)}(${String(args[0])}) -> ${String(error)}`);
          await thawed();
          throw error;
        }
        trace(`${name} ${String(property)}(${brief(args)}) -> ${brief(result)}`);
        oracle.storeCallLanded(String(property), args, result);
        if (property === "findStaleRuns" && racing.onStaleLook !== undefined) {
          await racing.onStaleLook(result as string[]);
        }
        // Frozen while the answer was on its way: it landed, but the process hears it after the thaw.
        await thawed();
        return result;
      };
    },
  });
  const racing: RacingStore = {
    store,
    freezeAt(afterCalls, ms, onFreeze) {
      armed = { at: calls + afterCalls, ms, onFreeze };
    },
    thaw,
    onStaleLook: undefined,
  };
  return racing;
}
