/**
 * The messages between the tool's thread and a host worker (ADR 0478): the worker that holds a
 * document's run doc and projection and answers its runs' binding calls, so that no host work of a run
 * is done on the tool's thread.
 */
import type { MessagePort } from "node:worker_threads";
import type { SandboxFailure, ScriptOutcome } from "../sandbox/sandbox-protocol.ts";
import type { RowLookup } from "../server/document-host.ts";
import type { CacheLimits } from "./document-cache.ts";
import type { RunSessionInput } from "./run-session.ts";

/**
 * Words of a run's channel signal: an answer waits, the host has gone, the host is answering a call,
 * the run's host work retains more than its limit (ADR 0490; set before the answer that says so).
 */
export const signalWords = 4;
export const answerWaiting = 0;
export const hostGone = 1;
export const hostWorking = 2;
export const overRetained = 3;

/** From the tool's thread to a host worker. */
export type ToHostWorker =
  | {
      readonly type: "open";
      readonly callId: number;
      readonly runId: number;
      readonly key: string;
      /**
       * The replica's updates the worker's copy lacks, imported in order: for its first run, a snapshot
       * (the one kept from the document's last fresh worker, when there is one) and the updates since.
       */
      readonly updates: readonly Uint8Array[];
      readonly schema: { readonly module: string; readonly exportName: string };
      readonly input: RunSessionInput;
      readonly limits: CacheLimits;
      /** The bytes the run's host work may retain (ADR 0490). */
      readonly retainedBytes: number;
      /**
       * Rows on demand (ADR 0466): asked of the tool's thread, which asks the document server; `stages`:
       * the run hands the server parts of its update through it too (ADR 0508).
       */
      readonly rows: { readonly wholeUpTo: number; readonly stages?: boolean } | undefined;
      readonly port: MessagePort;
      readonly signal: SharedArrayBuffer;
    }
  | {
      /**
       * Hold the document before any run asks (ADR 0495): a worker made to replace one past its
       * memory bound imports the replica and checks its run document out once, so the next run pays
       * only the updates since.
       */
      readonly type: "prepare";
      readonly callId: number;
      /**
       * `catch-up`: a kept worker takes the replica's updates since its last run (a committed plan,
       * ADR 0498) before the next run asks; its runs' growth is measured as before. Otherwise a fresh
       * worker takes its document, and its growth is measured from its first run's open.
       */
      readonly catchUp?: boolean;
      readonly key: string;
      readonly updates: readonly Uint8Array[];
      readonly schema: { readonly module: string; readonly exportName: string };
      readonly limits: CacheLimits;
      readonly rows: { readonly wholeUpTo: number } | undefined;
    }
  | {
      readonly type: "call-async";
      readonly callId: number;
      readonly runId: number;
      readonly binding: string;
      readonly method: string;
      readonly args: readonly unknown[];
    }
  | {
      readonly type: "finish";
      readonly callId: number;
      readonly runId: number;
      readonly outcome: ScriptOutcome;
    }
  | { readonly type: "close"; readonly runId: number }
  | {
      readonly type: "answer";
      readonly callId: number;
      readonly ok: boolean;
      readonly value?: unknown;
      readonly error?: SandboxFailure;
    };

/** From a host worker to the tool's thread. */
export type FromHostWorker =
  | { readonly type: "ready" }
  | { readonly type: "boot-failed"; readonly message: string }
  | {
      readonly type: "answer";
      readonly callId: number;
      readonly ok: boolean;
      readonly value?: unknown;
      readonly error?: SandboxFailure;
    }
  /** A host hook of a run (`loadEntityAsset`, `uploadText`): called on the tool's thread. */
  | {
      readonly type: "hook";
      readonly callId: number;
      readonly runId: number;
      readonly method: string;
      readonly payload: unknown;
    }
  /**
   * A run's host work was released: how much Loro's memory (which never shrinks) has grown since the
   * worker opened its document, so the tool's thread can replace a worker past its bound.
   */
  | {
      readonly type: "closed";
      readonly runId: number;
      /** Loro's memory once the worker had opened its document, and its growth since. */
      readonly openBytes: number;
      readonly grownBytes: number;
    }
  /** Stored rows of the worker's document, read from the document server. */
  | { readonly type: "rows"; readonly callId: number; readonly lookups: readonly RowLookup[] }
  /** A part of a run's update for the document server ahead of its push (ADR 0508). */
  | { readonly type: "stage"; readonly callId: number; readonly part: Uint8Array };

/** What a host worker is told of a run's rows on demand: their bound, and whether it stages parts. */
export function wiredRows(
  rows: { readonly wholeUpTo: number; readonly stage?: unknown } | undefined,
): { readonly wholeUpTo: number; readonly stages?: boolean } | undefined {
  if (rows === undefined) return undefined;
  return rows.stage === undefined
    ? { wholeUpTo: rows.wholeUpTo }
    : { wholeUpTo: rows.wholeUpTo, stages: true };
}
