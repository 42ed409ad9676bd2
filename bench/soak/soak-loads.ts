/** The soak's load: mesh calls, document pushes, durable runs and memory writes, each counted as an Op. */
import { createDocumentClient, openDocument, timelineSchema } from "@tackle/docscript";
import type { MemoryClient } from "@tackle/memory";
import type { createMeshClient } from "@tackle/mesh";
import { LoroDoc } from "loro-crdt";
import { durableRequest, type Op, type Phase, sleep, type Workload } from "./soak-model.ts";
import { durableLeaseMs, meshHeldMs, turnsPerJob } from "./soak-processes.ts";

/** What every load reads and the fault schedule writes: the fault and phase now, and when to stop. */
export interface LoadState {
  fault: number;
  phase: Phase;
  stop: boolean;
  readonly ops: Record<Workload, Op[]>;
  readonly notes: string[];
}

export function createLoadState(): LoadState {
  return {
    fault: 0,
    phase: "before",
    stop: false,
    ops: {
      "mesh calls": [],
      "document pushes": [],
      "durable runs": [],
      "memory adds": [],
      "memory import jobs": [],
    },
    notes: [],
  };
}

function begin(state: LoadState, workload: Workload) {
  const op: Op = {
    fault: state.fault,
    phase: state.phase,
    outcome: "failed",
    ms: 0,
    duplicated: 0,
    crashWindow: 0,
    endedAt: 0,
  };
  state.ops[workload].push(op);
  return { op, started: performance.now() };
}

function settle(op: Op, started: number) {
  op.endedAt = performance.now();
  op.ms = op.endedAt - started;
}

type MeshClient = Awaited<ReturnType<typeof createMeshClient>>;

export function meshLoad(state: LoadState, client: MeshClient) {
  // Mesh load: four callers, each pausing 5 ms between calls (unpaced, they took most of a core from
  // the processes being restarted); an op is lost if it does not settle within its deadline plus slack.
  // Calls that failed at their deadline are noted with their caller: a lost request holds its caller.
  const meshTimeouts: { fault: number; caller: number }[] = [];
  /** Calls that failed `node_lost`, and when (performance.now()). */
  const meshNodeLost: { fault: number; caller: number; at: number }[] = [];
  const callers = Array.from({ length: 4 }, async (_unused, caller) => {
    while (!state.stop) {
      const { op, started } = begin(state, "mesh calls");
      const settled = await Promise.race([
        client.call("pool.whoami", {}),
        new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), meshHeldMs + 2000)),
      ]);
      settle(op, started);
      op.outcome = settled === "hung" ? "lost" : settled.ok ? "ok" : "failed";
      if (settled !== "hung" && !settled.ok && settled.error.code === "timeout")
        meshTimeouts.push({ fault: op.fault, caller });
      if (settled !== "hung" && !settled.ok && settled.error.code === "node_lost")
        meshNodeLost.push({ fault: op.fault, caller, at: op.endedAt });
      await sleep(op.outcome === "ok" ? 5 : 50);
    }
  });
  return { done: callers, meshTimeouts, meshNodeLost };
}

export function documentLoad(
  state: LoadState,
  { origins, token, documentId }: { origins: readonly (() => string)[]; token: string; documentId: string },
) {
  // Document load: two writers, one per server, each push a caption with a unique text.
  const captions = new Map<string, Op>();
  let writerSeq = 0;
  const writer = (server: () => string, peer: number) =>
    (async () => {
      while (!state.stop) {
        const origin = server();
        const doc = new LoroDoc();
        doc.setPeerId(peer * 1_000_000 + writerSeq);
        const text = `caption ${peer}-${writerSeq++}`;
        const { op, started } = begin(state, "document pushes");
        try {
          const documents = createDocumentClient({ origin, token, userId: `w${peer}` });
          await documents.pullInto(documentId, doc);
          const before = doc.oplogVersion();
          openDocument(doc, timelineSchema).entities.create({ entityKind: "caption", payload: { text } });
          doc.commit();
          const result = await documents.push(documentId, doc.export({ mode: "update", from: before }));
          settle(op, started);
          if (result.status === "committed") {
            op.outcome = "ok";
            captions.set(text, op);
          }
        } catch {
          settle(op, started);
          await sleep(100);
        }
      }
    })();
  const docLoad = origins.map((origin, index) => writer(origin, index + 1));
  return { done: docLoad, captions };
}

export function durableLoad(state: LoadState, runnerUrls: readonly string[], settleMs: number) {
  // Durable load: three clients, each starting a run on the runners in turn (on the other at once if
  // the connection is refused: nothing was sent) and following it to its end. A run left running by
  // a runner that died or lost its database is taken over with `resume?recover=true`, which the
  // runners refuse (`run_active`) until the run has been silent for the lease.
  const runIds = new Map<string, Op>();
  let runSeq = 0;
  const followRun = async (threadId: string, acknowledged: boolean, first: number, deadline: number) => {
    let target = first;
    let lastRecover = 0;
    let last = "";
    const startedAt = Date.now();
    while (Date.now() < deadline) {
      const read = await durableRequest(runnerUrls[target] as string, `/runs/${threadId}`);
      last = `${read.status} ${read.code ?? JSON.stringify(read.json).slice(0, 200)}`;
      if (read.status === 404) return acknowledged ? "lost" : "failed";
      if (read.status !== 200) {
        target = 1 - target;
        await sleep(200);
        continue;
      }
      if (typeof read.json.runId === "string") runIds.set(read.json.runId, runOp(threadId));
      if (read.json.status === "completed") return "ok";
      if (read.json.status !== "running") return "failed";
      const now = Date.now();
      if (now - startedAt > durableLeaseMs && now - lastRecover > 500) {
        lastRecover = now;
        // Either runner may take it; the one still driving it answers run_active.
        target = 1 - target;
        const taken = await durableRequest(
          runnerUrls[target] as string,
          `/runs/${threadId}/resume?recover=true`,
          { answers: {} },
        );
        last += ` / recover: ${taken.status} ${taken.code ?? JSON.stringify(taken.json).slice(0, 200)}`;
      }
      await sleep(100);
    }
    state.notes.push(`durable: run ${threadId} never ended; last answers: ${last}`);
    return "lost";
  };
  const runOps = new Map<string, Op>();
  const runOp = (threadId: string) => runOps.get(threadId) as Op;
  const workers = Array.from({ length: 3 }, (_unused, worker) =>
    (async () => {
      while (!state.stop) {
        const threadId = `soak-run-${worker}-${runSeq++}`;
        const { op, started } = begin(state, "durable runs");
        runOps.set(threadId, op);
        let target = runSeq % 2;
        let answer = await durableRequest(runnerUrls[target] as string, "/runs", {
          graph: "soak",
          threadId,
        });
        if (answer.code === "ECONNREFUSED") {
          target = 1 - target;
          answer = await durableRequest(runnerUrls[target] as string, "/runs", { graph: "soak", threadId });
        }
        if (answer.status >= 400 && answer.status < 500) {
          settle(op, started);
          await sleep(100);
          continue;
        }
        // Acknowledged (201), or unknown (a 5xx or a lost connection: the run may exist).
        op.outcome = await followRun(threadId, answer.status === 201, target, Date.now() + settleMs);
        settle(op, started);
        if (op.outcome !== "ok") await sleep(100);
      }
    })(),
  );
  return { done: workers, runIds };
}

export function memoryLoad(state: LoadState, memory: MemoryClient, settleMs: number) {
  // Memory load: two writers adding memories with unique texts, two importers each running one
  // import job at a time, all through one client listing both services (the first service gets every
  // job while it is up and holds one most of the time; the other claims one queued while it is busy).
  const added = new Map<string, { op: Op; memoryId: string }>();
  let addSeq = 0;
  const adders = Array.from({ length: 2 }, () =>
    (async () => {
      while (!state.stop) {
        const tag = `soakadd${addSeq++}x`;
        const { op, started } = begin(state, "memory adds");
        try {
          const answer = await memory.add({
            userId: "soak",
            content: `Remember the code word ${tag} for the ${tag.length % 2 ? "north" : "south"} gate.`,
          });
          op.outcome = "ok";
          added.set(tag, { op, memoryId: answer.memory.id });
        } catch {
          await sleep(100);
        }
        settle(op, started);
      }
    })(),
  );
  const jobs = new Map<string, { op: Op; tag: string }>();
  let jobSeq = 0;
  const importers = Array.from({ length: 2 }, () =>
    (async () => {
      while (!state.stop) {
        const tag = `soakjob${jobSeq++}t`;
        const { op, started } = begin(state, "memory import jobs");
        const messages = Array.from({ length: turnsPerJob }, (_unused, index) => ({
          role: index % 2 === 0 ? "user" : "assistant",
          content:
            index % 2 === 0
              ? `I prefer blend ${tag}${index} for the morning tea.`
              : `Noted, blend ${tag}${index}.`,
        }));
        let jobId: string;
        try {
          const { job } = await memory.importConversations({
            userId: "soak",
            format: "openai",
            infer: true,
            conversations: [{ id: tag, messages }],
          });
          jobId = job.id;
        } catch {
          settle(op, started);
          await sleep(100);
          continue;
        }
        jobs.set(jobId, { op, tag });
        // Followed to its end through the same client (it fails over too); lost if it never ends.
        op.outcome = "lost";
        const deadline = Date.now() + settleMs;
        while (Date.now() < deadline) {
          const status = await memory
            .getJob(jobId)
            .then(({ job }) => job.status)
            .catch(() => "unknown");
          if (status === "succeeded" || status === "failed") {
            op.outcome = status === "succeeded" ? "ok" : "failed";
            break;
          }
          await sleep(150);
        }
        settle(op, started);
      }
    })(),
  );
  return { done: [...adders, ...importers], added, jobs };
}
