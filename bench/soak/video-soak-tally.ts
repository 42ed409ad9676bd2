/**
 * The video soak's count: what landed once the load stopped (the captions on the timeline, the
 * transcriptions the Python child ran, the styles the memory holds), turned into a row per fault, and
 * the notes the table does not show.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { MeshClient } from "@tackle/mesh";
import type { Caption } from "../../examples/video-assistant/agent.ts";
import type { StackLayout } from "../../examples/video-assistant/stack.ts";

/** One run as the soak's user followed it. */
export interface RunRecord {
  readonly threadId: string;
  readonly media: string;
  readonly userId: string;
  /** The fault in whose window it started. */
  readonly fault: number;
  readonly startedAt: number;
  endedAt?: number;
  captions?: readonly Caption[];
  /** Durable tool steps: 5 for a user's first run (the style is remembered), 4 after. */
  readonly steps: number;
  wrongStyle: boolean;
}

export interface VideoSoakRow {
  readonly fault: string;
  /** Runs started in this fault's window (its phase before the fault, the fault, its phase after). */
  readonly runs: number;
  readonly completed: number;
  /** Durable tool steps of the completed runs. */
  readonly steps: number;
  /** Never completed within the deadline, or completed without each of its captions on the timeline. */
  readonly lost: number;
  /** A transcription run twice, a caption twice on the timeline. */
  readonly duplicated: number;
  /** Runs whose proposed captions were not in the user's remembered style. */
  readonly wrongStyle: number;
  readonly p50Ms: number;
  readonly maxMs: number;
}

export interface Landed {
  /** Each caption text on the timeline, with how often it is there. */
  readonly onTimeline: Map<string, number>;
  /** Each media, with how often the Python child transcribed it. */
  readonly executions: Map<string, number>;
  readonly captionCount: number;
}

/** The non-empty lines of a file (none when it does not exist). */
export function lines(file: string): string[] {
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];
}

/** Reads what landed; notes a user whose style is not remembered exactly once. */
export async function readLanded(
  viewer: MeshClient,
  layout: StackLayout,
  userIds: readonly string[],
  notes: string[],
): Promise<Landed> {
  const onTimeline = new Map<string, number>();
  let cursor: string | undefined;
  let captionCount = 0;
  do {
    const page = await viewer.call("docscript.edit", {
      op: "snapshot",
      doc_id: "sample-timeline",
      kinds: ["caption"],
      include: "entities",
      fields: ["text"],
      ...(cursor === undefined ? {} : { cursor }),
    });
    if (!page.ok) throw page.error;
    const output = page.output as { entities: { payload: { text: string } }[]; next_cursor?: string };
    for (const entity of output.entities)
      onTimeline.set(entity.payload.text, (onTimeline.get(entity.payload.text) ?? 0) + 1);
    captionCount += output.entities.length;
    cursor = output.next_cursor;
  } while (cursor !== undefined);
  const executions = new Map<string, number>();
  for (const line of lines(layout.transcriptionLog)) {
    const media = line.split(" ")[0] as string;
    executions.set(media, (executions.get(media) ?? 0) + 1);
  }
  for (const userId of userIds) {
    const found = await viewer.call("memory.memory_search", {
      userId,
      query: "caption style",
      kinds: ["preference"],
    });
    const held = found.ok ? (found.output as { results: unknown[] }).results.length : -1;
    if (held !== 1) notes.push(`user ${userId}: ${held} caption styles remembered (want 1)`);
  }
  return { onTimeline, executions, captionCount };
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

/** A row per fault, for the runs started in its window. */
export function rowsOf(
  faults: readonly string[],
  runs: readonly RunRecord[],
  landed: Landed,
): VideoSoakRow[] {
  return faults.map((name, index): VideoSoakRow => {
    const mine = runs.filter((run) => run.fault === index);
    const completed = mine.filter((run) => run.captions !== undefined);
    let lost = mine.length - completed.length;
    let duplicated = 0;
    for (const run of mine) {
      if ((landed.executions.get(run.media) ?? 0) > 1) duplicated += 1;
      for (const caption of run.captions ?? []) {
        const count = landed.onTimeline.get(caption.text) ?? 0;
        if (count === 0) lost += 1;
        if (count > 1) duplicated += 1;
      }
    }
    const times = completed.map((run) => (run.endedAt as number) - run.startedAt);
    return {
      fault: name,
      runs: mine.length,
      completed: completed.length,
      steps: completed.reduce((sum, run) => sum + run.steps, 0),
      lost,
      duplicated,
      wrongStyle: mine.filter((run) => run.wrongStyle).length,
      p50Ms: percentile(times, 50),
      maxMs: times.length === 0 ? Number.NaN : Math.max(...times),
    };
  });
}

/** The notes: the calls the agent asked again (from the drivers' logs), the child's repeats, the counts. */
export function landedNotes(driverLogs: readonly string[], layout: StackLayout, landed: Landed): string[] {
  const failures = new Map<string, number>();
  for (const line of driverLogs.join("\n").split("\n")) {
    const match = /"tool":"([^"]+)".*"code":"([^"]+)"/.exec(line);
    if (match !== null)
      failures.set(`${match[1]} ${match[2]}`, (failures.get(`${match[1]} ${match[2]}`) ?? 0) + 1);
  }
  const notes = [
    `mesh calls the agent asked again under their key (tool, code: count): ${failures.size === 0 ? "none" : [...failures].map(([what, count]) => `${what}: ${count}`).join(", ")}`,
  ];
  const repeats = lines(join(layout.homes.speech, "transcriptions.repeats"));
  if (repeats.length > 0)
    notes.push(
      `the Python tool answered ${repeats.length} repeated key(s) from its own record (a call its killed node's orphaned child had finished: ${repeats.map((line) => line.split(" ")[0]).join(", ")})`,
    );
  const total = [...landed.executions.values()].reduce((sum, count) => sum + count, 0);
  const ranTwice = [...landed.executions]
    .filter(([, count]) => count > 1)
    .map(([media, count]) => `${media} ×${count}`);
  notes.push(
    `transcriptions: ${total} executions for ${landed.executions.size} media${ranTwice.length > 0 ? ` (more than once: ${ranTwice.join(", ")})` : ", each once"}; captions on the timeline: ${landed.captionCount - 1} besides the sample's`,
  );
  return notes;
}

export function formatVideoTable(rows: readonly VideoSoakRow[]): string {
  const ms = (value: number) => (Number.isNaN(value) ? "–" : value.toFixed(0));
  const table = [
    "| fault | runs | completed | tool steps | lost | duplicated | wrong style | run ms p50 / max |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
  ];
  for (const row of rows)
    table.push(
      `| ${row.fault} | ${row.runs} | ${row.completed} | ${row.steps} | ${row.lost} | ${row.duplicated} | ${row.wrongStyle} | ${ms(row.p50Ms)} / ${ms(row.maxMs)} |`,
    );
  return table.join("\n");
}
