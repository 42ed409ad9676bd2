/**
 * For idempotent-writes.property.test.ts: two memory service processes on one store (restartable),
 * the writes the property sends under idempotency keys over real HTTP, and the oracle's model of what
 * the store must hold once each key's first body took effect exactly once.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { underLoadMs } from "@tackle/test-support";

const child = fileURLToPath(new URL("./idempotent-service-child.ts", import.meta.url));

interface Running {
  readonly process: ChildProcess;
  readonly url: string;
  /** What the process wrote to stderr (its log). */
  readonly stderr: () => string;
}

async function startChild(store: string): Promise<Running> {
  const started = spawn(process.execPath, ["--conditions=@tackle/source", child, store], {
    env: { PATH: process.env.PATH ?? "" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  started.stderr?.on("data", (chunk) => {
    stderr += String(chunk);
  });
  const startMs = underLoadMs(20_000);
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no start in ${startMs} ms: ${stderr}`)), startMs);
      started.once("exit", (code) => reject(new Error(`service exited with ${code}: ${stderr}`)));
      started.stdout?.on("data", (chunk) => {
        stdout += String(chunk);
        const ready = /ready (\S+)\n/.exec(stdout);
        if (ready) {
          clearTimeout(timer);
          resolve(ready[1]!);
        }
      });
    });
    return { process: started, url, stderr: () => stderr };
  } catch (error) {
    started.kill("SIGKILL");
    throw error;
  }
}

function stopChild(running: Running): Promise<void> {
  return new Promise((resolve) => {
    const { process: running_ } = running;
    if (running_.exitCode !== null || running_.signalCode !== null) return resolve();
    running_.once("exit", () => resolve());
    running_.kill("SIGTERM");
  });
}

/** Two service processes on one store: `urls[i]` is service i's address, which a restart changes. */
export class ServicePair {
  private readonly running: Running[] = [];
  private readonly stopped: string[] = [];
  private readonly store: string;
  private constructor(store: string) {
    this.store = store;
  }

  static async start(store: string): Promise<ServicePair> {
    const pair = new ServicePair(store);
    // One at a time: the first migrates the store.
    pair.running.push(await startChild(store));
    pair.running.push(await startChild(store));
    return pair;
  }

  url(index: number): string {
    return this.running[index]!.url;
  }

  /** The logs of the services running and of those restarted, for a failure's message. */
  logs(): string {
    return [...this.stopped, ...this.running.map((running) => running.stderr())].join("\n");
  }

  async restart(index: number): Promise<void> {
    await stopChild(this.running[index]!);
    this.stopped.push(this.running[index]!.stderr());
    this.running[index] = await startChild(this.store);
  }

  async close(): Promise<void> {
    await Promise.all(this.running.map(stopChild));
  }
}

/**
 * What the store holds, as the oracle has it: the memories added, by id; each session's event texts;
 * and those texts again as the episodes their turns are kept as (ADR 0361), whose ids it does not know.
 */
export interface Model {
  readonly memories: Map<string, { content: string; status: "active" | "deleted" }>;
  readonly events: Map<string, string[]>;
  readonly episodes: string[];
  readonly jobs: string[];
}

/** One write request; `apply` makes its effect on the model from its (first) answer. */
export interface Write {
  readonly label: string;
  readonly method: "POST" | "PATCH" | "DELETE";
  readonly path: string;
  readonly body?: unknown;
  readonly status: number;
  apply(answer: unknown, model: Model): void;
}

export interface Answer {
  readonly status: number;
  readonly body: unknown;
  readonly replayed: boolean;
}

export async function send(url: string, write: Write, key: string, signal?: AbortSignal): Promise<Answer> {
  const response = await fetch(`${url}${write.path}`, {
    method: write.method,
    headers: {
      authorization: "Bearer key-a",
      "idempotency-key": key,
      ...(write.body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(write.body === undefined ? {} : { body: JSON.stringify(write.body) }),
    ...(signal ? { signal } : {}),
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: response.status, body, replayed: response.headers.get("idempotent-replayed") === "true" };
}

/** A GET or POST read, answered 200. */
export async function read<T>(url: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${url}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: "Bearer key-a", "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  assert.equal(response.status, 200, `${path}: ${text}`);
  return JSON.parse(text) as T;
}

/** The writes the property draws from, for one user and two sessions of a round. */
export function writeMaker(random: () => number, userId: string, model: Model, tag: string) {
  let counter = 0;
  // A text of its own every time; with "slow" in it, the service's embedder takes 400 ms over it, so
  // a resend finds its write still running.
  const text = (what: string) => {
    counter += 1;
    return `${what} ${tag}x${counter}${random() < 0.3 ? " slow" : ""}`;
  };
  const session = () => (random() < 0.5 ? "s0" : "s1");
  const active = () => [...model.memories].filter(([, memory]) => memory.status === "active");
  const add = (): Write => {
    const content = text("Ada noted");
    return {
      label: `add ${content}`,
      method: "POST",
      path: "/v1/memories",
      body: { userId, kind: "episode", content },
      status: 200,
      apply(answer, into) {
        const { memory } = answer as { memory: { id: string; content: string } };
        assert.equal(memory.content, content);
        into.memories.set(memory.id, { content, status: "active" });
      },
    };
  };
  const event = (): Write => {
    const content = text("Assistant said");
    const sessionId = session();
    return {
      label: `event ${content}`,
      method: "POST",
      path: "/v1/events",
      body: { userId, sessionId, role: "assistant", content, infer: false },
      status: 200,
      apply(_answer, into) {
        into.events.set(sessionId, [...(into.events.get(sessionId) ?? []), content]);
        into.episodes.push(content);
      },
    };
  };
  const importOf = (): Write => {
    const turns = [text("I said"), text("You answered")];
    const sessionId = session();
    return {
      label: `import ${turns[0]}`,
      method: "POST",
      path: "/v1/jobs/import",
      body: {
        format: "openai",
        userId,
        infer: false,
        conversations: [
          {
            sessionId,
            messages: [
              { role: "user", content: turns[0] },
              { role: "assistant", content: turns[1] },
            ],
          },
        ],
      },
      status: 202,
      apply(answer, into) {
        into.events.set(sessionId, [...(into.events.get(sessionId) ?? []), ...turns]);
        into.episodes.push(...turns);
        into.jobs.push((answer as { job: { id: string } }).job.id);
      },
    };
  };
  const update = (id: string): Write => {
    const content = text("Ada changed");
    return {
      label: `update ${id} to ${content}`,
      method: "PATCH",
      path: `/v1/memories/${id}?userId=${userId}`,
      body: { content },
      status: 200,
      apply(answer, into) {
        assert.equal((answer as { memory: { content: string } }).memory.content, content);
        into.memories.set(id, { content, status: "active" });
      },
    };
  };
  const remove = (id: string): Write => ({
    label: `delete ${id}`,
    method: "DELETE",
    path: `/v1/memories/${id}?userId=${userId}`,
    status: 200,
    apply(answer, into) {
      assert.equal((answer as { memory: { status: string } }).memory.status, "deleted");
      into.memories.get(id)!.status = "deleted";
    },
  });
  return {
    /** A write that never touches what another write of the round touches: an add, an event, an import. */
    independent(): Write {
      const pick = random();
      return pick < 0.5 ? add() : pick < 0.8 ? event() : importOf();
    },
    /** Any write: the independent ones, or an update or a delete of an active memory of the model. */
    any(): Write {
      const targets = active();
      if (targets.length === 0 || random() < 0.5) return this.independent();
      const [id] = targets[Math.floor(random() * targets.length)]!;
      return random() < 0.6 ? update(id) : remove(id);
    },
  };
}

/** The store as the API reads it back equals the model: memories by status, and each session's events. */
export async function checkModel(url: string, userId: string, model: Model): Promise<void> {
  for (const id of model.jobs) {
    const deadline = Date.now() + underLoadMs(20_000);
    for (;;) {
      const { job } = await read<{ job: { status: string; error?: unknown } }>(url, `/v1/jobs/${id}`);
      if (job.status === "succeeded") break;
      assert.notEqual(job.status, "failed", `import ${id}: ${JSON.stringify(job.error)}`);
      assert.ok(Date.now() < deadline, `import ${id} still ${job.status}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  for (const status of ["active", "deleted"] as const) {
    const { memories } = await read<{ memories: { id: string; content: string }[] }>(
      url,
      `/v1/memories?userId=${userId}&status=${status}&limit=200`,
    );
    const added = memories.filter((memory) => model.memories.has(memory.id));
    const expected = [...model.memories]
      .filter(([, memory]) => memory.status === status)
      .map(([id, memory]) => `${id} ${memory.content}`)
      .sort();
    assert.deepEqual(added.map((memory) => `${memory.id} ${memory.content}`).sort(), expected, status);
    assert.deepEqual(
      memories
        .filter((memory) => !model.memories.has(memory.id))
        .map((memory) => memory.content)
        .sort(),
      status === "active" ? [...model.episodes].sort() : [],
      `${status} episodes`,
    );
  }
  for (const sessionId of ["s0", "s1"]) {
    const { events } = await read<{ events: { content: string }[] }>(url, "/v1/conversations/recall", {
      userId,
      sessionId,
      order: "asc",
      limit: 200,
    });
    assert.deepEqual(
      events.map((event) => event.content).sort(),
      [...(model.events.get(sessionId) ?? [])].sort(),
      `events of ${sessionId}`,
    );
  }
}
