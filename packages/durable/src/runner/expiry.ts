/**
 * Approval expiries, one timer per runner: a timer per paused run made a flood of paused runs a flood of
 * timers in the process (ADR 0123). The soonest expiry arms the one timer; when it fires, every run due
 * is resumed (answered as expired) and the timer is armed for the next. Paused runs' expiries sit in a
 * binary heap keyed by time, the live one per thread in a map, so a run answered or cancelled here is
 * dropped at once and a stale heap entry is skipped when it comes up.
 */
export interface ExpiryQueue {
  /** Resumes `threadId` at `at` (ms since the epoch), replacing any expiry it had. */
  schedule(threadId: string, at: number): void;
  /** Forgets `threadId`'s expiry (its run was resumed, answered or cancelled here). */
  drop(threadId: string): void;
  /** How many runs wait on an expiry, and the heap's length (for tests and measures). */
  size(): { readonly runs: number; readonly entries: number; readonly timers: number };
  close(): void;
}

type Entry = readonly [at: number, threadId: string];

export function createExpiryQueue(fire: (threadId: string) => void): ExpiryQueue {
  const due = new Map<string, number>();
  let heap: Entry[] = [];
  let timer: NodeJS.Timeout | undefined;
  let armedAt = Number.POSITIVE_INFINITY;
  let closed = false;

  const push = (entry: Entry) => {
    heap.push(entry);
    for (let i = heap.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if ((heap[parent] as Entry)[0] <= entry[0]) break;
      heap[i] = heap[parent] as Entry;
      heap[parent] = entry;
      i = parent;
    }
  };
  const pop = (): Entry | undefined => {
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    heap[0] = last;
    for (let i = 0; ; ) {
      const left = 2 * i + 1;
      const right = left + 1;
      let least = i;
      if (left < heap.length && (heap[left] as Entry)[0] < (heap[least] as Entry)[0]) least = left;
      if (right < heap.length && (heap[right] as Entry)[0] < (heap[least] as Entry)[0]) least = right;
      if (least === i) break;
      [heap[i], heap[least]] = [heap[least] as Entry, heap[i] as Entry];
      i = least;
    }
    return top;
  };
  /** Stale entries (runs answered or rescheduled) are dropped in bulk once they outnumber live ones. */
  const compact = () => {
    if (heap.length <= 2 * due.size + 64) return;
    const live = [...due].map(([threadId, at]): Entry => [at, threadId]);
    heap = [];
    for (const entry of live) push(entry);
  };
  const arm = () => {
    const next = heap[0]?.[0] ?? Number.POSITIVE_INFINITY;
    if (closed || next >= armedAt) return;
    if (timer !== undefined) clearTimeout(timer);
    armedAt = next;
    timer = setTimeout(run, Math.min(2 ** 31 - 1, Math.max(0, next - Date.now()) + 5));
    timer.unref();
  };
  const run = () => {
    timer = undefined;
    armedAt = Number.POSITIVE_INFINITY;
    const now = Date.now();
    while (heap.length > 0 && (heap[0] as Entry)[0] <= now) {
      const [at, threadId] = pop() as Entry;
      if (due.get(threadId) !== at) continue;
      due.delete(threadId);
      fire(threadId);
    }
    compact();
    arm();
  };

  return {
    schedule(threadId, at) {
      if (closed || due.get(threadId) === at) return;
      due.set(threadId, at);
      push([at, threadId]);
      compact();
      arm();
    },
    drop(threadId) {
      due.delete(threadId);
    },
    size: () => ({ runs: due.size, entries: heap.length, timers: timer === undefined ? 0 : 1 }),
    close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      due.clear();
      heap = [];
    },
  };
}
