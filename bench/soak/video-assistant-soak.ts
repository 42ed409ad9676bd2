/**
 * The video assistant under faults (examples/video-assistant): its five processes — the broker in
 * operator mode, the studio node (memory, docscript), the speech node, the speech node's Python stdio
 * child and the durable driver — each killed in turn (the broker SIGKILLed and restarted on its store)
 * while users start runs, approve them over durable's HTTP API and wait for their captions. Counts per
 * fault: runs, tool steps, lost (a run that never completed, or completed without its captions on the
 * timeline) and duplicated (a transcription run twice, a caption on the timeline twice, a style
 * remembered twice). A phase without a fault comes first: the baseline.
 *
 * Run: node --conditions=@tackle/source bench/soak/video-assistant-soak.ts [seconds per phase, default 5]
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { RunSnapshot } from "@tackle/durable";
import { createDurableClient, type DurableClient } from "@tackle/durable/http";
import { createMeshClient, type MeshClient } from "@tackle/mesh";
import { freePort, startNatsServer } from "@tackle/test-support";
import type { AssistantState, Caption } from "../../examples/video-assistant/agent.ts";
import {
  initAuthority,
  issueCredentials,
  type NodeName,
  type Proc,
  stackLayout,
  startDriver,
  startNode,
} from "../../examples/video-assistant/stack.ts";

export const faults = [
  "none (baseline)",
  "driver SIGKILL + restart",
  "studio node SIGKILL + restart",
  "speech node SIGKILL + restart",
  "Python child SIGKILL",
  "broker SIGKILL + restart",
] as const;
export type Fault = (typeof faults)[number];

export interface VideoSoakRow {
  readonly fault: Fault;
  /** Runs started in this fault's window (its phase before the fault, the fault, its phase after). */
  readonly runs: number;
  readonly completed: number;
  /** Durable tool steps of the completed runs (4 or 5 a run: the style is remembered once per user). */
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

export interface VideoSoakResult {
  readonly rows: VideoSoakRow[];
  readonly notes: string[];
}

interface RunRecord {
  readonly threadId: string;
  readonly media: string;
  readonly userId: string;
  readonly fault: number;
  readonly startedAt: number;
  endedAt?: number;
  captions?: readonly Caption[];
  steps: number;
  wrongStyle: boolean;
}

const users = [
  { userId: "ada", style: "uppercase" },
  { userId: "bo", style: "lowercase" },
  { userId: "cy", style: "uppercase" },
  { userId: "di", style: "lowercase" },
] as const;
const runDeadlineMs = 180_000;

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

export async function runVideoSoak(options: { phaseMs: number }): Promise<VideoSoakResult> {
  const { phaseMs } = options;
  const root = mkdtempSync(join(tmpdir(), "tackle-video-soak-"));
  const layout = stackLayout(root);
  const notes: string[] = [];
  const began = performance.now();
  await initAuthority(layout);
  const nats = await startNatsServer({ extraArgs: ["-c", layout.serverConfig] });
  const nodes = new Map<NodeName, Proc>();
  let driver: (Proc & { url: string }) | undefined;
  let viewer: MeshClient | undefined;
  try {
    await issueCredentials(layout, nats.url);
    const [studio, speech] = await Promise.all([
      startNode(layout, "studio", nats.url),
      startNode(layout, "speech", nats.url),
    ]);
    nodes.set("studio", studio).set("speech", speech);
    const port = await freePort();
    const startTheDriver = () =>
      startDriver(layout, nats.url, { port, leaseMs: 2000, transcribeSeconds: 0.4 });
    driver = await startTheDriver();
    const client: DurableClient = createDurableClient({ baseUrl: driver.url, timeoutMs: 10_000 });
    viewer = await createMeshClient({
      servers: nats.url,
      credsFile: layout.creds.assistant,
      timeoutMs: 30_000,
    });
    notes.push(`processes up in ${((performance.now() - began) / 1000).toFixed(1)} s`);

    const runs: RunRecord[] = [];
    let fault = 0;
    let stopping = false;
    const known = new Set<string>();

    /** One user's loop: a run at a time, each started, approved and followed to its end. */
    const user = async (index: number) => {
      const who = users[index % users.length] as (typeof users)[number];
      for (let n = 0; !stopping; n++) {
        const media = `${who.userId}-${n}.wav`;
        const first = !known.has(who.userId);
        known.add(who.userId);
        const run: RunRecord = {
          threadId: `${who.userId}-${n}`,
          media,
          userId: who.userId,
          fault,
          startedAt: performance.now(),
          steps: first ? 5 : 4,
          wrongStyle: false,
        };
        runs.push(run);
        const request = first ? `Caption ${media} in ${who.style} please` : `Caption ${media}`;
        await follow(client, run, { userId: who.userId, media, request }, who.style);
      }
    };

    const follow = async (
      durable: DurableClient,
      run: RunRecord,
      input: { userId: string; media: string; request: string },
      style: string,
    ) => {
      const deadline = run.startedAt + runDeadlineMs;
      let started = false;
      while (performance.now() < deadline) {
        try {
          if (!started) {
            await durable.start("video-assistant", input, { threadId: run.threadId, runId: run.threadId });
            started = true;
          }
          const snapshot = (await durable.get(run.threadId)) as RunSnapshot<AssistantState>;
          if (snapshot.status === "completed") {
            run.endedAt = performance.now();
            run.captions = snapshot.state.captions ?? [];
            return;
          }
          if (snapshot.status === "failed" || snapshot.status === "cancelled") {
            notes.push(`run ${run.threadId} ended ${snapshot.status}: ${JSON.stringify(snapshot.error)}`);
            return;
          }
          const [approval] = snapshot.status === "paused" ? snapshot.interrupts : [];
          if (approval !== undefined) {
            const proposed = (approval.request as { params: { captions: Caption[] } }).params.captions;
            const styled = (text: string) =>
              style === "uppercase" ? text.toUpperCase() : text.toLowerCase();
            if (proposed.some((caption) => caption.text !== styled(caption.text))) run.wrongStyle = true;
            await durable.resume(run.threadId, { [approval.id]: { approved: true } });
          }
        } catch {
          // The driver is down or restarting: ask again.
        }
        await sleep(200);
      }
    };

    // Kills, each on a moment where it catches work in hand.
    const transcriptionLines = () =>
      existsSync(layout.transcriptionLog)
        ? readFileSync(layout.transcriptionLog, "utf8").split("\n").filter(Boolean)
        : [];
    const nextTranscription = async () => {
      const count = transcriptionLines().length;
      const until = performance.now() + 20_000;
      while (transcriptionLines().length === count && performance.now() < until) await sleep(10);
    };
    const restartNode = async (name: NodeName) => {
      await nodes.get(name)?.stop("SIGKILL");
      nodes.set(name, await startNode(layout, name, nats.url));
    };
    const downtimes: string[] = [];
    /** The stderr of each driver that ended: its "mesh call failed" lines, one per call asked again. */
    const driverLogs: string[] = [];
    const inject = async (which: Fault) => {
      const at = performance.now();
      switch (which) {
        case "driver SIGKILL + restart":
          // Inside the crash window: a transcription just ran, its step not yet recorded.
          await nextTranscription();
          await driver?.stop("SIGKILL");
          driverLogs.push(driver?.stderr() ?? "");
          driver = await startTheDriver();
          break;
        case "studio node SIGKILL + restart":
          await restartNode("studio");
          break;
        case "speech node SIGKILL + restart":
          await sleep(150); // most often while the Python child transcribes
          await restartNode("speech");
          break;
        case "Python child SIGKILL": {
          // While it transcribes: a transcription begun and not yet done.
          const startedFile = join(layout.homes.speech, "transcriptions.started");
          const begun = () =>
            existsSync(startedFile) ? readFileSync(startedFile, "utf8").split("\n").filter(Boolean) : [];
          const until = performance.now() + 20_000;
          while (begun().length <= transcriptionLines().length && performance.now() < until) await sleep(5);
          const pid = Number(begun().at(-1)?.split(" ")[1]);
          if (Number.isInteger(pid) && pid > 0) {
            try {
              process.kill(pid, "SIGKILL");
            } catch {
              notes.push(`the Python child ${pid} was already gone`);
            }
          }
          break;
        }
        case "broker SIGKILL + restart":
          await nats.signal("SIGKILL");
          await nats.stop();
          await sleep(500);
          await nats.restart();
          break;
        default:
          break;
      }
      downtimes.push(`${which}: ${((performance.now() - at) / 1000).toFixed(1)} s`);
    };

    const loops = users.map((_, index) => user(index));
    for (let index = 0; index < faults.length; index++) {
      fault = index;
      await sleep(phaseMs);
      await inject(faults[index] as Fault);
      await sleep(phaseMs);
    }
    stopping = true;
    const settling = performance.now();
    await Promise.all(loops);
    notes.push(
      `timing: faults and phases ${((settling - began) / 1000).toFixed(1)} s, open runs settled in ${((performance.now() - settling) / 1000).toFixed(1)} s; each fault's repair: ${downtimes.join(", ")}`,
    );

    // What landed: the captions on the timeline, the transcriptions run, the styles remembered.
    const snapshot = await viewer.call("docscript.edit", {
      op: "snapshot",
      doc_id: "sample-timeline",
      kinds: ["caption"],
      include: "entities",
      fields: ["text"],
    });
    if (!snapshot.ok) throw snapshot.error;
    const onTimeline = new Map<string, number>();
    const page = snapshot.output as { entities: { payload: { text: string } }[]; next_cursor?: string };
    let entities = page.entities;
    let cursor = page.next_cursor;
    while (cursor !== undefined) {
      const more = await viewer.call("docscript.edit", {
        op: "snapshot",
        doc_id: "sample-timeline",
        kinds: ["caption"],
        include: "entities",
        fields: ["text"],
        cursor,
      });
      if (!more.ok) throw more.error;
      const next = more.output as typeof page;
      entities = [...entities, ...next.entities];
      cursor = next.next_cursor;
    }
    for (const entity of entities)
      onTimeline.set(entity.payload.text, (onTimeline.get(entity.payload.text) ?? 0) + 1);
    const executions = new Map<string, number>();
    for (const line of transcriptionLines()) {
      const media = line.split(" ")[0] as string;
      executions.set(media, (executions.get(media) ?? 0) + 1);
    }
    for (const { userId } of users) {
      const found = await viewer.call("memory.memory_search", {
        userId,
        query: "caption style",
        kinds: ["preference"],
      });
      const held = found.ok ? (found.output as { results: unknown[] }).results.length : -1;
      if (held !== 1) notes.push(`user ${userId}: ${held} caption styles remembered (want 1)`);
    }

    const rows = faults.map((name, index): VideoSoakRow => {
      const mine = runs.filter((run) => run.fault === index);
      const completed = mine.filter((run) => run.captions !== undefined);
      let lost = mine.length - completed.length;
      let duplicated = 0;
      for (const run of mine) {
        if ((executions.get(run.media) ?? 0) > 1) duplicated += 1;
        for (const caption of run.captions ?? []) {
          const count = onTimeline.get(caption.text) ?? 0;
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
    driverLogs.push(driver?.stderr() ?? "");
    const failures = new Map<string, number>();
    for (const line of driverLogs.join("\n").split("\n")) {
      const match = /"tool":"([^"]+)".*"code":"([^"]+)"/.exec(line);
      if (match !== null)
        failures.set(`${match[1]} ${match[2]}`, (failures.get(`${match[1]} ${match[2]}`) ?? 0) + 1);
    }
    notes.push(
      `mesh calls the agent asked again under their key (tool, code: count): ${failures.size === 0 ? "none" : [...failures].map(([what, count]) => `${what}: ${count}`).join(", ")}`,
    );
    const repeatsFile = join(layout.homes.speech, "transcriptions.repeats");
    const repeats = existsSync(repeatsFile)
      ? readFileSync(repeatsFile, "utf8").split("\n").filter(Boolean)
      : [];
    if (repeats.length > 0)
      notes.push(
        `the Python tool answered ${repeats.length} repeated key(s) from its own record (a call its killed node's orphaned child had finished: ${repeats.map((line) => line.split(" ")[0]).join(", ")})`,
      );
    const ranTwice = [...executions]
      .filter(([, count]) => count > 1)
      .map(([media, count]) => `${media} ×${count}`);
    notes.push(
      `transcriptions: ${transcriptionLines().length} executions for ${executions.size} media${ranTwice.length > 0 ? ` (more than once: ${ranTwice.join(", ")})` : ", each once"}; captions on the timeline: ${entities.length - 1} besides the sample's`,
    );
    return { rows, notes };
  } finally {
    await viewer?.close();
    await driver?.stop("SIGKILL");
    for (const proc of nodes.values()) await proc.stop("SIGKILL");
    await nats.close();
    rmSync(root, { recursive: true, force: true });
  }
}

export function formatVideoTable(rows: readonly VideoSoakRow[]): string {
  const ms = (value: number) => (Number.isNaN(value) ? "–" : value.toFixed(0));
  const lines = [
    "| fault | runs | completed | tool steps | lost | duplicated | wrong style | run ms p50 / max |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
  ];
  for (const row of rows)
    lines.push(
      `| ${row.fault} | ${row.runs} | ${row.completed} | ${row.steps} | ${row.lost} | ${row.duplicated} | ${row.wrongStyle} | ${ms(row.p50Ms)} / ${ms(row.maxMs)} |`,
    );
  return lines.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const seconds = Number(process.argv[2] ?? 5);
  const { rows, notes } = await runVideoSoak({ phaseMs: seconds * 1000 });
  process.stdout.write(`${formatVideoTable(rows)}\n\n${notes.join("\n")}\n`);
  process.exit(0);
}
