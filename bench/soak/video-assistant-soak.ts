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
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { RunSnapshot } from "@tackle/durable";
import { createDurableClient, type DurableClient } from "@tackle/durable/http";
import { createMeshClient, type MeshClient } from "@tackle/mesh";
import { freePort, type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import type { AssistantState, Caption } from "../../examples/video-assistant/agent.ts";
import {
  initAuthority,
  issueCredentials,
  type NodeName,
  type Proc,
  type StackLayout,
  stackLayout,
  startDriver,
  startNode,
} from "../../examples/video-assistant/stack.ts";
import {
  formatVideoTable,
  landedNotes,
  lines,
  type RunRecord,
  readLanded,
  rowsOf,
  type VideoSoakRow,
} from "./video-soak-tally.ts";

export { formatVideoTable, type VideoSoakRow };

export const faults = [
  "none (baseline)",
  "driver SIGKILL + restart",
  "studio node SIGKILL + restart",
  "speech node SIGKILL + restart",
  "Python child SIGKILL",
  "broker SIGKILL + restart",
] as const;
export type Fault = (typeof faults)[number];

export interface VideoSoakResult {
  readonly rows: VideoSoakRow[];
  readonly notes: string[];
}

const users = [
  { userId: "ada", style: "uppercase" },
  { userId: "bo", style: "lowercase" },
  { userId: "cy", style: "uppercase" },
  { userId: "di", style: "lowercase" },
] as const;
const runDeadlineMs = 180_000;

/** Starts, approves and follows one run to its end (or its deadline), through driver restarts. */
async function followRun(
  durable: DurableClient,
  run: RunRecord,
  input: { userId: string; media: string; request: string },
  style: string,
  notes: string[],
): Promise<void> {
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
        const styled = (text: string) => (style === "uppercase" ? text.toUpperCase() : text.toLowerCase());
        if (proposed.some((caption) => caption.text !== styled(caption.text))) run.wrongStyle = true;
        await durable.resume(run.threadId, { [approval.id]: { approved: true } });
      }
    } catch {
      // The driver is down or restarting: ask again.
    }
    await sleep(200);
  }
}

/** The processes the faults act on, and the driver's logs kept across its restarts. */
interface Stack {
  readonly layout: StackLayout;
  readonly nats: NatsServerHandle;
  readonly nodes: Map<NodeName, Proc>;
  driver: Proc;
  readonly startTheDriver: () => Promise<Proc>;
  /** The stderr of each driver that ended: its "mesh call failed" lines, one per call asked again. */
  readonly driverLogs: string[];
  readonly notes: string[];
}

/** Injects one fault, each on a moment where it catches work in hand; resolves once it is repaired. */
async function inject(stack: Stack, which: Fault): Promise<void> {
  const { layout, nats, nodes } = stack;
  const done = () => lines(layout.transcriptionLog).length;
  const restartNode = async (name: NodeName) => {
    await nodes.get(name)?.stop("SIGKILL");
    nodes.set(name, await startNode(layout, name, nats.url));
  };
  switch (which) {
    case "driver SIGKILL + restart": {
      // Inside the crash window: a transcription just ran, its step not yet recorded.
      const count = done();
      const until = performance.now() + 20_000;
      while (done() === count && performance.now() < until) await sleep(10);
      await stack.driver.stop("SIGKILL");
      stack.driverLogs.push(stack.driver.stderr());
      stack.driver = await stack.startTheDriver();
      return;
    }
    case "studio node SIGKILL + restart":
      return restartNode("studio");
    case "speech node SIGKILL + restart":
      await sleep(150); // most often while the Python child transcribes
      return restartNode("speech");
    case "Python child SIGKILL": {
      // While it transcribes: a transcription begun and not yet done.
      const begun = () => lines(join(layout.homes.speech, "transcriptions.started"));
      const until = performance.now() + 20_000;
      while (begun().length <= done() && performance.now() < until) await sleep(5);
      const pid = Number(begun().at(-1)?.split(" ")[1]);
      if (!(Number.isInteger(pid) && pid > 0)) return;
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        stack.notes.push(`the Python child ${pid} was already gone`);
      }
      return;
    }
    case "broker SIGKILL + restart":
      await nats.signal("SIGKILL");
      await nats.stop();
      await sleep(500);
      return nats.restart();
    default:
      return;
  }
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
  let stack: Stack | undefined;
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
    const driver = await startTheDriver();
    stack = { layout, nats, nodes, driver, startTheDriver, driverLogs: [], notes };
    const client = createDurableClient({ baseUrl: driver.url, timeoutMs: 10_000 });
    viewer = await createMeshClient({
      servers: nats.url,
      credsFile: layout.creds.assistant,
      timeoutMs: 30_000,
    });
    notes.push(`processes up in ${((performance.now() - began) / 1000).toFixed(1)} s`);

    const runs: RunRecord[] = [];
    let fault = 0;
    let stopping = false;
    /** One user's loop: a run at a time; the first states the style, the later ones rely on the memory. */
    const user = async (who: (typeof users)[number]) => {
      for (let n = 0; !stopping; n++) {
        const media = `${who.userId}-${n}.wav`;
        const run: RunRecord = {
          threadId: `${who.userId}-${n}`,
          media,
          userId: who.userId,
          fault,
          startedAt: performance.now(),
          steps: n === 0 ? 5 : 4,
          wrongStyle: false,
        };
        runs.push(run);
        const request = n === 0 ? `Caption ${media} in ${who.style} please` : `Caption ${media}`;
        await followRun(client, run, { userId: who.userId, media, request }, who.style, notes);
      }
    };
    const loops = users.map(user);
    const repairs: string[] = [];
    for (let index = 0; index < faults.length; index++) {
      fault = index;
      await sleep(phaseMs);
      const at = performance.now();
      await inject(stack, faults[index] as Fault);
      repairs.push(`${faults[index]}: ${((performance.now() - at) / 1000).toFixed(1)} s`);
      await sleep(phaseMs);
    }
    stopping = true;
    const settling = performance.now();
    await Promise.all(loops);
    notes.push(
      `timing: faults and phases ${((settling - began) / 1000).toFixed(1)} s, open runs settled in ${((performance.now() - settling) / 1000).toFixed(1)} s; each fault's repair: ${repairs.join(", ")}`,
    );
    const landed = await readLanded(
      viewer,
      layout,
      users.map((who) => who.userId),
      notes,
    );
    stack.driverLogs.push(stack.driver.stderr());
    return {
      rows: rowsOf(faults, runs, landed),
      notes: [...notes, ...landedNotes(stack.driverLogs, layout, landed)],
    };
  } finally {
    await viewer?.close();
    await stack?.driver.stop("SIGKILL");
    for (const proc of nodes.values()) await proc.stop("SIGKILL");
    await nats.close();
    rmSync(root, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const seconds = Number(process.argv[2] ?? 5);
  const { rows, notes } = await runVideoSoak({ phaseMs: seconds * 1000 });
  process.stdout.write(`${formatVideoTable(rows)}\n\n${notes.join("\n")}\n`);
  process.exit(0);
}
