/**
 * The results ledger (ADR 0210) on two nodes of one module over a real nats-server with JetStream: a
 * call under an idempotency key runs once whichever node each repeat reaches, concurrent repeats wait
 * for the first, other arguments under a used key are refused, a retryable failure frees the key, a
 * call without a key runs every time, and a node that dies mid-call hands its key to the other node,
 * whose tool is asked whether the earlier run's effect landed (ADR 0213): a node SIGKILLed between its
 * tool's effect and the ledger's record leaves one effect, answered by the tool's recovery; a tool
 * that declares none runs again, told it takes the key over.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import { connect } from "@nats-io/transport-node";
import { silentLogger } from "@tackle/core";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import { createMeshClient, type MeshClient, type NodeRuntime, startNodeRuntime } from "../src/index.ts";
import { createResultsLedger } from "../src/runtime/results-ledger.ts";
import { eventually, fixture, meshConfig } from "./helpers.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-mesh-results-"));
let nats: NatsServerHandle;
const runtimes: NodeRuntime[] = [];
let client: MeshClient;

before(async () => {
  nats = await startNatsServer();
  for (const node of ["node-a", "node-b"]) {
    runtimes.push(
      await startNodeRuntime({
        config: meshConfig(node, nats.url, [{ module: "effects", path: fixture("effects.mjs") }]),
      }),
    );
  }
  client = await createMeshClient({ servers: nats.url, timeoutMs: 10_000 });
  await eventually("both nodes serve", async () => {
    const nodes = new Set<string>();
    for (let index = 0; index < 20; index++) {
      const result = await client.call("effects.apply", { file: join(directory, "warmup"), id: "w" });
      if (result.ok) nodes.add((result.output as { node: string }).node);
    }
    return nodes.size === 2 ? true : undefined;
  });
});
after(async () => {
  await client?.close();
  for (const runtime of runtimes) await runtime.close();
  await nats?.close();
  rmSync(directory, { recursive: true, force: true });
});

function effects(file: string): string[] {
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];
}

it("a key runs once across the module's nodes; repeats, concurrent or later, get the first result", async () => {
  const file = join(directory, "once");
  const call = () =>
    client.call("effects.apply", { file, id: "k1", ms: 300 }, { idempotencyKey: "run-1:step-1" });
  const answers = await Promise.all(Array.from({ length: 6 }, call));
  const later = await Promise.all(Array.from({ length: 10 }, call));
  const [first] = answers;
  assert.equal(first?.ok, true, JSON.stringify(first));
  for (const answer of [...answers, ...later]) assert.deepEqual(answer, first);
  assert.equal(effects(file).length, 1, effects(file).join("\n"));
});

it("other arguments under a used key are refused; a retryable failure frees the key; no key runs every time", async () => {
  const file = join(directory, "rules");
  assert.equal(
    (await client.call("effects.apply", { file, id: "a" }, { idempotencyKey: "k-args" })).ok,
    true,
  );
  const reused = await client.call("effects.apply", { file, id: "b" }, { idempotencyKey: "k-args" });
  assert.equal(!reused.ok && reused.error.code, "idempotency_key_reused");
  const failed = await client.call(
    "effects.apply",
    { file, id: "c", fail: true },
    { idempotencyKey: "k-retry" },
  );
  assert.equal(!failed.ok && failed.error.code, "unavailable");
  // The same call again under the key (its arguments as before): it runs, since the failure freed it.
  const retried = await client.call(
    "effects.apply",
    { file, id: "c", fail: true },
    { idempotencyKey: "k-retry" },
  );
  assert.equal(!retried.ok && retried.error.code, "unavailable");
  for (let index = 0; index < 3; index++)
    assert.equal((await client.call("effects.apply", { file, id: "n" })).ok, true);
  assert.deepEqual(
    effects(file).map((line) => line.split(" ")[0]),
    ["a", "n", "n", "n"],
  );
});

it("property: random repeats, concurrency and argument changes against an oracle", async () => {
  const file = join(directory, "property");
  let seed = 29;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const keys = 150;
  const calls = 1500;
  const answers = new Map<string, string[]>();
  const pending: Promise<void>[] = [];
  for (let index = 0; index < calls; index++) {
    const key = `p-${Math.floor(random() * keys)}`;
    // One call in twenty carries other arguments than the key's own.
    const id = random() < 0.05 ? `${key}-other` : key;
    pending.push(
      client
        .call("effects.apply", { file, id, ms: id.length * 3 }, { idempotencyKey: key })
        .then((result) => {
          const list = answers.get(key) ?? [];
          list.push(JSON.stringify({ id, result: result.ok ? result.output : result.error.code }));
          answers.set(key, list);
        }),
    );
    if (pending.length >= 48) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
  const ran = effects(file).map((line) => line.split(" ")[2] as string);
  // Oracle: each key ran exactly once, with the arguments of whichever call ran it; every call with
  // those arguments got that run's answer, every other one idempotency_key_reused.
  assert.equal(new Set(ran).size, ran.length, "a key ran twice");
  assert.deepEqual(new Set(ran), new Set(answers.keys()));
  for (const [key, list] of answers) {
    const [line] = effects(file).filter((entry) => entry.split(" ")[2] === key);
    const [runId, runNode] = (line as string).split(" ");
    for (const answer of list.map((text) => JSON.parse(text) as { id: string; result: unknown })) {
      if (answer.id === runId)
        assert.deepEqual(answer.result, { id: runId, node: runNode }, `${key}: ${list.join(" ")}`);
      else assert.equal(answer.result, "idempotency_key_reused");
    }
  }
});

/** A node process serving `module` alone, until the test starts another; killed at the end. */
async function nodeProcess(name: string, module: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      "--conditions=@tackle/source",
      fixture("node-process.ts"),
      name,
      nats.url,
      module,
      fixture("effects.mjs"),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} not ready`)), 60_000);
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      if (line.startsWith("ready")) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  return child;
}

it("a node killed while it runs a key hands the key to the next node, which runs it once", async () => {
  const file = join(directory, "takeover");
  // Module "handover" is served by node-k (its own process) alone until the call runs there.
  const child = await nodeProcess("node-k", "handover");
  let second: NodeRuntime | undefined;
  try {
    const args = { file, id: "h", ms: 4000 };
    const first = client.call("handover.apply", args, { idempotencyKey: "handover-1", timeoutMs: 20_000 });
    const ledger = await new Kvm(client.connection).open("tackle-mesh-results-handover");
    const id = createHash("sha256").update("apply\nhandover-1").digest("hex");
    await eventually("node-k runs the key", async () =>
      (await ledger.get(id))?.json<{ node?: string }>()?.node === "node-k" ? true : undefined,
    );
    second = await startNodeRuntime({
      config: meshConfig("node-j", nats.url, [{ module: "handover", path: fixture("effects.mjs") }]),
    });
    child.kill("SIGKILL");
    const lost = await first;
    assert.equal(!lost.ok && lost.error.code, "node_lost", JSON.stringify(lost));
    // What a durable driver does next: the same call under the same key. node-j finds node-k gone,
    // takes the key over, asks the tool whether the effect landed (it did not) and runs it.
    const repeat = await client.call("handover.apply", args, {
      idempotencyKey: "handover-1",
      timeoutMs: 20_000,
    });
    assert.deepEqual(repeat, { ok: true, output: { id: "h", node: "node-j" } });
    assert.deepEqual(
      effects(file).map((line) => line.split(" ").slice(0, 2).join(" ")),
      ["h node-j"],
    );
    // And once recorded, a repeat is answered from the ledger.
    assert.deepEqual(await client.call("handover.apply", args, { idempotencyKey: "handover-1" }), repeat);
    assert.equal(effects(file).length, 1);
  } finally {
    child.kill("SIGKILL");
    await second?.close();
  }
});

it("a node killed after its tool's effect, before the ledger's record: a tool with recovery answers it, one without runs again, told", async () => {
  const file = join(directory, "window");
  // Module "window" on node-w alone; its tool SIGKILLs node-w right after the effect (dieAfter).
  const child = await nodeProcess("node-w", "window");
  const children = [child];
  let second: NodeRuntime | undefined;
  let third: NodeRuntime | undefined;
  try {
    const recovering = { file, id: "r", dieAfter: true };
    const blind = { file, id: "b", dieAfter: true };
    const lost = await client.call("window.apply", recovering, { idempotencyKey: "w-1", timeoutMs: 20_000 });
    assert.equal(!lost.ok && lost.error.code, "node_lost", JSON.stringify(lost));
    assert.deepEqual(effects(file), ["r node-w w-1"]);
    second = await startNodeRuntime({
      config: meshConfig("node-v", nats.url, [{ module: "window", path: fixture("effects.mjs") }]),
    });
    // The repeat: node-v takes the key over; the tool's recover finds the effect by the key and answers
    // the earlier run's outcome; the effect stays one line.
    const repeat = await client.call("window.apply", recovering, {
      idempotencyKey: "w-1",
      timeoutMs: 20_000,
    });
    assert.deepEqual(repeat, { ok: true, output: { id: "r", node: "node-w" } });
    assert.deepEqual(await client.call("window.apply", recovering, { idempotencyKey: "w-1" }), repeat);
    assert.equal(effects(file).length, 1, effects(file).join("\n"));
    // A tool that declares no recovery: the taker-over cannot know whether the effect landed; it runs
    // the tool again and tells it so (context.takeover): at-least-once in this window (ADR 0213).
    // (On module "blinds", served by node-u alone until its tool kills it, then by node-t.)
    const blindChild = await nodeProcess("node-u", "blinds");
    children.push(blindChild);
    const blindLost = await client.call("blinds.blind", blind, { idempotencyKey: "w-2", timeoutMs: 20_000 });
    assert.equal(!blindLost.ok && blindLost.error.code, "node_lost", JSON.stringify(blindLost));
    third = await startNodeRuntime({
      config: meshConfig("node-t", nats.url, [{ module: "blinds", path: fixture("effects.mjs") }]),
    });
    const again = await client.call("blinds.blind", blind, { idempotencyKey: "w-2", timeoutMs: 20_000 });
    assert.deepEqual(again, { ok: true, output: { id: "b", node: "node-t" } });
    assert.deepEqual(await client.call("blinds.blind", blind, { idempotencyKey: "w-2" }), again);
    assert.deepEqual(effects(file), ["r node-w w-1", "b node-u w-2", "b node-t w-2 takeover node-u"]);
  } finally {
    for (const each of children) each.kill("SIGKILL");
    await second?.close();
    await third?.close();
  }
});

it("a node whose bucket create comes after another node's opened the ledger still reaches it", async () => {
  // The race two nodes' first keyed calls run: both find no bucket; the first adds it and sets its
  // discard policy; the second's add, arriving after that, differs in configuration. Forced here: the
  // first node's stream-create waits until the second has looked for the stream (and not found it),
  // and the second's stream-create waits until the first node's call has answered.
  const [plainFirst, second] = await Promise.all([
    connect({ servers: nats.url }),
    connect({ servers: nats.url }),
  ]);
  let firstDone!: () => void;
  const firstAnswered = new Promise<void>((resolve) => {
    firstDone = resolve;
  });
  let secondLooked!: () => void;
  const secondFoundNone = new Promise<void>((resolve) => {
    secondLooked = resolve;
  });
  const holding = (
    connection: typeof second,
    hold: (subject: string) => Promise<void>,
    after = (_: string) => {},
  ) =>
    new Proxy(connection, {
      get(target, property) {
        if (property === "request")
          return async (subject: string, ...rest: unknown[]) => {
            await hold(subject);
            try {
              return await (target.request as (...args: unknown[]) => Promise<unknown>)(subject, ...rest);
            } finally {
              after(subject);
            }
          };
        const value = Reflect.get(target, property);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  const first = holding(plainFirst, async (subject) => {
    if (subject.includes(".STREAM.CREATE.")) await secondFoundNone;
  });
  const held = holding(
    second,
    async (subject) => {
      if (subject.includes(".STREAM.CREATE.")) await firstAnswered;
    },
    (subject) => {
      // Its look for the results bucket's stream, not the membership stream's it reads first.
      if (subject.includes(".STREAM.INFO.") && subject.includes("-results-race")) secondLooked();
    },
  );
  for (const [index, connection] of [first, second].entries())
    connection.subscribe(`_alive.race.${index}`, {
      callback: (_error, message) => {
        message.respond();
      },
    });
  let runs = 0;
  const call = (connection: typeof first, index: number) =>
    createResultsLedger(connection, "race", `node-${index}`, silentLogger).once(
      {
        tool: "apply",
        key: "k",
        args: {},
        alive: `_alive.race.${index}`,
        signal: AbortSignal.timeout(10_000),
        deadline: Date.now() + 10_000,
      },
      async () => {
        runs++;
        return { ok: true, output: { node: index } };
      },
    );
  try {
    const late = call(held, 1);
    const early = await call(first, 0);
    firstDone();
    assert.deepEqual(early, { ok: true, output: { node: 0 } });
    assert.deepEqual(await late, early);
    assert.equal(runs, 1);
  } finally {
    await plainFirst.close();
    await second.close();
  }
});
