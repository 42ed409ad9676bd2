/**
 * A large run hands what it has written to the document server in parts while its script goes on
 * (ADR 0508): the server imports each part into the replica its push will be checked in and reads the
 * rows it touched while it would otherwise wait for the run, so the push of 33,000 writes finds most of
 * its import and reads done. Parts are sent without waiting for their answers, at most `partsInFlight`
 * unanswered; a part refused stops the run's staging (the push is then judged as any push). Small runs
 * never stage.
 */
import type { LoroDoc } from "loro-crdt";

/** Hands a part to the server: whether it was staged. */
export type StagePart = (part: Uint8Array) => Promise<{ readonly staged: boolean }>;

/** Atoms a run writes before it stages them: below this a run's push costs the server little. */
export const stageAfterAtoms = 4_000;
/**
 * Atoms per part: the server imports a part in one go (~20 ms for 500 field writes at 100k entities)
 * while the run's own reads queue behind it, so parts stay small.
 */
export const atomsPerPart = 500;
/**
 * A run stages for this long at most by default (a third of the default 30 s limit; the tool's
 * `sandbox.stageForMs`): the server's work on parts shares the machine with the run, and on a
 * saturated one it slows the run as much as it saves the push; past this the rest goes with the push.
 */
export const stageForMs = 10_000;
/**
 * Parts a run has sent and not had answered, at most: the server does them one at a time, and holds a
 * credential to 64 requests in flight on a document (ADR 0482) that the run's own reads share. Writes
 * past it wait for the next part, or go with the push.
 */
export const partsInFlight = 16;

export interface RunStaging {
  /** Called after each write call: stages what the run wrote since the last part, when it is enough. */
  afterWrite(): void;
  /**
   * The script has ended: no more parts. With `rest`, a run that staged parts stages the rest of its
   * writes first (the server takes them while the run's end checks go on); a failed run stages none.
   */
  stop(rest: boolean): void;
}

/**
 * The staging of the run writing on `doc` (its own peer), from the run's base version. A part's writes
 * are committed with the plan's own commit options (`planCommit`): the plan's id is read off its
 * changes' messages, and a run whose last writes were staged has no change left for the plan's own.
 */
export function runStaging(
  doc: LoroDoc,
  stage: StagePart | undefined,
  planCommit: { readonly message: string; readonly origin: string },
  now: () => number = () => performance.now(),
  /** How long from the run's start it stages (`stageForMs` by default). */
  forMs: number = stageForMs,
): RunStaging {
  if (stage === undefined) return { afterWrite() {}, stop() {} };
  const peer = doc.peerIdStr;
  const base = doc.oplogVersion().get(peer) ?? 0;
  let staged = base;
  let stopped = false;
  let unanswered = 0;
  const started = now();
  const stageWritten = (atLeast: number) => {
    if (stopped) return;
    if (now() - started > forMs) {
      stopped = true;
      return;
    }
    if (unanswered >= partsInFlight) return;
    // The version counts the atoms still pending too.
    const written = doc.oplogVersion().get(peer) ?? 0;
    if (written - staged < atLeast) return;
    doc.commit(planCommit);
    const end = doc.oplogVersion().get(peer) ?? 0;
    while (staged < end && unanswered < partsInFlight) {
      const len = Math.min(atomsPerPart, end - staged);
      const part = doc.export({ mode: "updates-in-range", spans: [{ id: { peer, counter: staged }, len }] });
      staged += len;
      unanswered += 1;
      stage(part).then(
        (answer) => {
          unanswered -= 1;
          if (!answer.staged) stopped = true;
        },
        () => {
          unanswered -= 1;
          stopped = true;
        },
      );
    }
  };
  return {
    afterWrite: () => stageWritten(stageAfterAtoms),
    stop(rest) {
      if (rest && staged > base) stageWritten(1);
      stopped = true;
    },
  };
}
