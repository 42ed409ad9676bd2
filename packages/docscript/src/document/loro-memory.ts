/**
 * Loro's WebAssembly memory in this thread, and the headroom kept in it (ADR 0502). Each time that
 * memory grows, V8 counts the whole grown memory as newly allocated external memory and starts a full
 * marking of the thread's heap ("external memory pressure"); Loro's allocator grows it a few pages at a
 * time, so a large write (a shift of 33,000 markers: ~60 grows) marked a heap of 200–300 MiB of held
 * rows some 60 times. Once it has grown, a step more is allocated and freed inside it: the allocator
 * keeps what was freed and serves the next allocations from it, and the memory grows again a step later.
 */
import { createRequire } from "node:module";

interface LoroExports {
  readonly memory?: unknown;
  readonly __wbindgen_malloc?: (size: number, align: number) => number;
  readonly __wbindgen_free?: (pointer: number, size: number, align: number) => void;
}

const require = createRequire(import.meta.url);

/** The exports of the WebAssembly instance `import "loro-crdt"` loads in Node (its CommonJS build). */
function loroExports(): LoroExports | undefined {
  try {
    const entry = require.resolve("loro-crdt");
    return (require(entry.replace(/index\.js$/, "loro_wasm.js")) as { __wasm?: LoroExports }).__wasm;
  } catch {
    return undefined;
  }
}

const wasm = loroExports();
const memory = wasm?.memory instanceof WebAssembly.Memory ? wasm.memory : undefined;

/** The bytes of this thread's Loro memory (it grows, never shrinks). */
export const loroBytes = (): number => memory?.buffer.byteLength ?? 0;

/** The most the memory grows by at once when it has to grow: unused, it is at most this much more. */
export const maxHeadroomBytes = 16 * 2 ** 20;

/** What the memory grows by at once now: a run's host sets it from the run's retained limit. */
let headroomBytes = maxHeadroomBytes;

/**
 * Sizes the headroom for a run whose host work may retain `limitBytes` (ADR 0490): a sixteenth of
 * it, at most `maxHeadroomBytes`. The headroom a run makes counts as its growth, so a run may fail
 * its limit that much early, never late.
 */
export function sizeLoroHeadroom(limitBytes: number): void {
  headroomBytes = Math.max(0, Math.min(maxHeadroomBytes, Math.floor(limitBytes / 16)));
}

/**
 * Leaves at least `bytes` free in Loro's memory, none of its pages touched: one block allocated and
 * freed (the allocator grows the memory once for it and keeps it). False when the allocator cannot
 * be reached (another build of Loro) or refuses: the caller makes the room its own way.
 */
export function reserveLoroMemory(bytes: number): boolean {
  const malloc = wasm?.__wbindgen_malloc;
  const free = wasm?.__wbindgen_free;
  if (malloc === undefined || free === undefined) return false;
  try {
    const pointer = malloc(bytes, 8);
    if (pointer === 0) return false;
    free(pointer, bytes, 8);
    return true;
  } catch {
    return false;
  }
}

/** Loro's memory as the last headroom left it (0: none kept yet). */
let keptAt = 0;

/**
 * Keeps headroom in Loro's memory: when it has grown since the last call, allocates `headroomBytes`
 * inside it and frees them. Cheap when it has not (a length read); called before each Loro write.
 */
export function keepLoroHeadroom(): void {
  if (memory === undefined || memory.buffer.byteLength === keptAt || headroomBytes === 0) return;
  if (!reserveLoroMemory(headroomBytes)) return;
  keptAt = memory.buffer.byteLength;
}
