/**
 * AG-UI 1.0 over HTTP, as `@ag-ui/client`'s HttpAgent speaks it: POST a `RunAgentInput`, read the SSE
 * events of one AG-UI run. A `runId` sent again answers the run it named (ADR 0110).
 */
import { RunAgentInputSchema } from "@ag-ui/core/schemas";
import type { Context, Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { DurableError } from "../errors/durable-error.ts";
import type { Answers, Runner } from "../runner/create-runner.ts";
import type { Frame } from "../store/durable-store.ts";
import { AgUiTranslator, agUiEventId, parseAgUiEventId, restateClientMessages } from "./ag-ui.ts";
import { invalid, readJson } from "./request.ts";
import { keepStreamPlace } from "./request-limit.ts";

/** The parts of AG-UI's `RunAgentInput` a graph may start from. */
export interface AgUiRunInput {
  readonly threadId: string;
  readonly runId: string;
  readonly state?: unknown;
  readonly messages: readonly unknown[];
  readonly forwardedProps?: unknown;
}

export interface AgUiRouteOptions {
  readonly runner: Runner;
  readonly keepAliveMs?: number;
  readonly agUiInput?: (input: AgUiRunInput) => object;
  /** The caller's storage key for a thread id it sent (its tenant's prefix added). */
  readonly scoped: (c: Context, threadId: string) => string;
}

/** Where a stream of one AG-UI run starts, and what it does when its client goes away mid-run. */
interface OneRun {
  /** The AG-UI run id this stream names its run by, when the frames do not carry it (a cancel's). */
  readonly runId?: string;
  /** Cancel the server's run when the client disconnects before the run paused or ended. */
  readonly cancelOnAbort: boolean;
}

export function agUiRoutes(options: AgUiRouteOptions) {
  const { runner } = options;

  function register(app: Hono): void {
    app.post("/ag-ui/:graph", async (c) => {
      const body = await readJson(c.req.raw);
      const parsed = RunAgentInputSchema.safeParse(body);
      if (!parsed.success) {
        throw invalid(
          `Not an AG-UI RunAgentInput: ${parsed.error.issues[0]?.message ?? "invalid"} at ${parsed.error.issues[0]?.path.join(".") ?? ""}`,
        );
      }
      const input = parsed.data;
      const threadId = options.scoped(c, input.threadId);
      const shown = input.threadId;
      const again = (seq: number) =>
        stream(c, threadId, shown, { seq, index: -1 }, { runId: input.runId, cancelOnAbort: true });
      // The same RunAgentInput sent again (a retry, a reload): the run it started, streamed again.
      const earlier = await segmentOf(runner, threadId, input.runId);
      if (earlier !== undefined) return again(earlier);
      const resume = input.resume ?? [];
      let launched: { firstSeq: number; runId: string; finished: Promise<unknown> };
      if (resume.length > 0) {
        const { answers, edited } = answersOf(input);
        // Kept for the stream to restate an edit, with each tool call as the thread showed it: never a
        // real value the client wrote into them (an edit's, a result's) that the tool's policy masks.
        const messages = edited ? await shownMessages(runner, threadId, input.messages) : undefined;
        try {
          launched = await runner.launchResume(threadId, answers, {
            clientRun: { runId: input.runId, ...(messages === undefined ? {} : { messages }) },
          });
        } catch (error) {
          // The run was cancelled while the client held its interrupts: its answer is that cancellation,
          // as an AG-UI run ending `cancelled`, which clears the client's pending interrupts.
          if (DurableError.isInstance(error) && error.code === "run_cancelled") {
            return again(await cancellationOf(runner, threadId));
          }
          throw error;
        }
        if (launched.firstSeq === 0) {
          const raced = await segmentOf(runner, threadId, input.runId);
          if (raced !== undefined) return again(raced);
          throw new DurableError(
            "run_not_paused",
            `Thread "${input.threadId}" has no open interrupt to resume`,
          );
        }
      } else {
        const graph = c.req.param("graph");
        const start = options.agUiInput?.(input) ?? defaultAgUiInput(input);
        // The AG-UI run id is the run's id, so a start sent twice at once starts one run.
        launched = await runner.launch(graph, start, {
          threadId,
          runId: input.runId,
          clientRun: { runId: input.runId },
        });
        if (launched.firstSeq === 0) {
          const raced = await segmentOf(runner, threadId, input.runId);
          if (raced !== undefined) return again(raced);
        }
      }
      launched.finished.catch(() => {});
      return again(launched.firstSeq);
    });

    // The AG-UI events of a whole thread, resumable mid-frame with Last-Event-ID (`<seq>.<index>`).
    app.get("/ag-ui/threads/:threadId/events", async (c) => {
      const threadId = options.scoped(c, c.req.param("threadId"));
      const last = c.req.header("last-event-id") ?? c.req.query("after");
      const after = last === undefined ? { seq: 0, index: Number.MAX_SAFE_INTEGER } : parseAgUiEventId(last);
      if (after === undefined) throw invalid("Last-Event-ID is an AG-UI event id (<seq>.<index>)");
      if ((await runner.get(threadId)) === undefined)
        throw DurableError.notFound(
          "run",
          c.req.param("threadId"),
          `No run for thread "${c.req.param("threadId")}"`,
        );
      return stream(c, threadId, c.req.param("threadId"), after, undefined);
    });
  }

  const stream = (
    c: Context,
    threadId: string,
    shownThreadId: string,
    from: { seq: number; index: number },
    oneRun: OneRun | undefined,
  ) => streamAgUi(options, c, threadId, shownThreadId, from, oneRun);

  return { register, stream };
}

function defaultAgUiInput(input: AgUiRunInput): object {
  const state =
    typeof input.state === "object" && input.state !== null && !Array.isArray(input.state)
      ? (input.state as Record<string, unknown>)
      : {};
  return "messages" in state || input.messages.length === 0 ? state : { ...state, messages: input.messages };
}

/**
 * The client's messages restated with the thread's tool calls as its frames showed them (ADR 0128). The
 * run is paused here, so no tool call's frame changes before the resume stores them.
 */
async function shownMessages(runner: Runner, threadId: string, messages: readonly unknown[]) {
  const frames = await runner.frames(threadId, { types: ["tool_call", "interrupt"], limit: 1_000_000 });
  return restateClientMessages(frames, messages);
}

/** The frame that began the AG-UI run the client named `clientRunId`, if it ran on this thread. */
async function segmentOf(runner: Runner, threadId: string, clientRunId: string): Promise<number | undefined> {
  if ((await runner.get(threadId)) === undefined) return undefined;
  const marks = await runner.frames(threadId, {
    types: ["run_started", "run_resumed"],
    limit: 1_000_000,
  });
  return marks.find((frame) => (frame.data as { clientRunId?: unknown } | null)?.clientRunId === clientRunId)
    ?.seq;
}

/** The first frame of the cancel that ended the thread's latest run: its cards' closing, then `run_cancelled`. */
async function cancellationOf(runner: Runner, threadId: string): Promise<number> {
  const run = await runner.get(threadId);
  const frames: Frame[] =
    run === undefined ? [] : await runner.frames(threadId, { runId: run.runId, limit: 1_000_000 });
  let index = frames.findLastIndex((frame) => frame.type === "run_cancelled");
  while (index > 0) {
    const previous = frames[index - 1] as Frame;
    if (previous.type !== "tool_call" || (previous.data as { status?: unknown }).status !== "cancelled")
      break;
    index--;
  }
  return frames[index]?.seq ?? 0;
}

function answersOf(input: {
  resume?: readonly { interruptId: string; status: string; payload?: unknown }[] | undefined;
}) {
  const entries: [string, unknown][] = [];
  let edited = false;
  for (const entry of input.resume ?? []) {
    entries.push([
      entry.interruptId,
      entry.status === "cancelled"
        ? { approved: false, cancelled: true, reason: "cancelled by the client" }
        : (entry.payload ?? null),
    ]);
    const payload = entry.payload as { editedArgs?: unknown } | undefined;
    if (typeof payload === "object" && payload !== null && payload.editedArgs !== undefined) edited = true;
  }
  // Own keys whatever the id: an assignment to "__proto__" would set the prototype and drop the answer,
  // so a resume naming no open interrupt would pass as a replay instead of being refused.
  return { answers: Object.fromEntries(entries) as Answers, edited };
}

/**
 * Streams AG-UI events from `from` (the event after frame `seq`'s `index`-th). The thread's earlier
 * frames go through the translator unsent, so what was announced before is not announced again. With
 * `oneRun`, the stream ends with that run's RUN_FINISHED or RUN_ERROR, and a client that goes away
 * before then (`HttpAgent.abortRun()`) cancels the run.
 */
function streamAgUi(
  { runner, keepAliveMs }: Pick<AgUiRouteOptions, "runner" | "keepAliveMs">,
  c: Context,
  threadId: string,
  shownThreadId: string,
  from: { seq: number; index: number },
  oneRun: OneRun | undefined,
) {
  const freeStreamPlace = keepStreamPlace(c);
  return streamSSE(c, async (sse) => {
    const aborted = new AbortController();
    sse.onAbort(() => aborted.abort());
    const keepAlive = setInterval(() => {
      sse.write(": keep-alive\n\n").catch(() => aborted.abort());
    }, keepAliveMs ?? 15_000);
    let ended = false;
    try {
      const run = await runner.get(threadId);
      const translator = new AgUiTranslator({ threadId: shownThreadId, runId: run?.runId ?? threadId });
      for await (const frame of runner.watch(threadId, { afterSeq: 0, signal: aborted.signal })) {
        if (frame.seq === from.seq && oneRun?.runId !== undefined) translator.nameNextRun(oneRun.runId);
        const events = translator.translate(frame);
        if (frame.seq < from.seq) continue;
        for (const [index, event] of events.entries()) {
          if (frame.seq === from.seq && index <= from.index) continue;
          await sse.writeSSE({
            id: agUiEventId(frame.seq, index),
            event: event.type,
            data: JSON.stringify(event),
          });
        }
        if (oneRun !== undefined && !translator.isRunOpen) {
          ended = true;
          break;
        }
      }
    } finally {
      clearInterval(keepAlive);
      try {
        if (
          oneRun?.cancelOnAbort === true &&
          !ended &&
          aborted.signal.aborted &&
          (await runner.get(threadId).catch(() => undefined))?.status === "running"
        ) {
          // The client stopped the run (HttpAgent.abortRun()): the server's run stops too.
          await runner.cancel(threadId, "the AG-UI client aborted the run").catch(() => {});
        }
      } finally {
        freeStreamPlace();
      }
    }
  });
}
