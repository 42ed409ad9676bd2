/**
 * The video assistant end to end, as its README runs it: a nats-server in operator mode on the
 * authority `tackle mesh init` made, credentials from `tackle mesh issue`/`issue-client`, `tackle serve`
 * on two nodes (studio: memory and docscript; speech: the Python transcription bundle) and the durable
 * driver. The model is scripted (no hosted LLM). A person approves over durable's HTTP API.
 *
 * Run 1: the user states a caption style; the agent remembers it, transcribes, proposes captions, and
 * the approver's edited captions land on the timeline. Run 2: the user states no style (the memory
 * answers it); its driver is SIGKILLed just after the transcription ran, and the driver started after
 * it takes the run over: the transcription does not run again and the captions land once.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { RunSnapshot } from "@tackle/durable";
import { createDurableClient } from "@tackle/durable/http";
import { createMeshClient, type MeshClient } from "@tackle/mesh";
import { type NatsServerHandle, startNatsServer, testTimeoutMs, underLoadMs } from "@tackle/test-support";
import type { AssistantState, Caption } from "./agent.ts";
import {
  initAuthority,
  issueCredentials,
  type Proc,
  type StackLayout,
  stackLayout,
  startDriver,
  startNode,
} from "./stack.ts";

const root = mkdtempSync(join(tmpdir(), "tackle-video-assistant-"));
const layout: StackLayout = stackLayout(root);
let nats: NatsServerHandle;
const procs: Proc[] = [];
let viewer: MeshClient;

before(async () => {
  await initAuthority(layout);
  nats = await startNatsServer({ extraArgs: ["-c", layout.serverConfig] });
  await issueCredentials(layout, nats.url);
  procs.push(
    ...(await Promise.all([startNode(layout, "studio", nats.url), startNode(layout, "speech", nats.url)])),
  );
  // The test reads the timeline as the driver does: with the assistant's own client credential.
  viewer = await createMeshClient({
    servers: nats.url,
    credsFile: layout.creds.assistant,
    timeoutMs: underLoadMs(30_000),
  });
});

after(async () => {
  await viewer?.close();
  for (const proc of procs) await proc.stop("SIGKILL");
  await nats?.close();
  rmSync(root, { recursive: true, force: true });
});

/** Polls the run until it leaves `running` (3 min at most on a quiet machine, more under load). */
async function settled(client: ReturnType<typeof createDurableClient>, threadId: string) {
  const waitMs = underLoadMs(180_000);
  const deadline = Date.now() + waitMs;
  for (;;) {
    const snapshot = (await client.get(threadId)) as RunSnapshot<AssistantState>;
    if (snapshot.status !== "running") return snapshot;
    assert.ok(Date.now() < deadline, `run ${threadId} still running after ${waitMs / 1000} s`);
    await sleep(250);
  }
}

/** The caption texts on the timeline, each with how often it is there. */
async function timelineCaptions(): Promise<Map<string, number>> {
  const result = await viewer.call("docscript.edit", {
    op: "snapshot",
    doc_id: "sample-timeline",
    kinds: ["caption"],
    include: "entities",
  });
  assert.ok(result.ok, result.ok ? "" : result.error.message);
  const page = result.output as { entities: { payload: { text: string } }[] };
  const counts = new Map<string, number>();
  for (const entity of page.entities)
    counts.set(entity.payload.text, (counts.get(entity.payload.text) ?? 0) + 1);
  return counts;
}

const transcriptions = (media: string) =>
  existsSync(layout.transcriptionLog)
    ? readFileSync(layout.transcriptionLog, "utf8")
        .split("\n")
        .filter((line) => line.startsWith(`${media} `)).length
    : 0;

it("remembers the style, transcribes on the other node, and lands the approved captions once", {
  timeout: testTimeoutMs(15 * 60_000),
}, async () => {
  let driver = await startDriver(layout, nats.url, { leaseMs: 2000 });
  procs.push(driver);
  let client = createDurableClient({ baseUrl: driver.url });

  // Run 1: the style is said, so it is remembered.
  await client.start(
    "video-assistant",
    { userId: "ada", media: "interview.wav", request: "Caption interview.wav, in uppercase please" },
    { threadId: "ada-1", runId: "ada-1" },
  );
  const paused = await settled(client, "ada-1");
  assert.equal(paused.status, "paused", JSON.stringify(paused));
  const [approval] = paused.interrupts;
  assert.ok(approval !== undefined);
  const proposed = (approval.request as { params: { captions: Caption[] } }).params.captions;
  assert.equal(proposed.length, 3);
  for (const caption of proposed) assert.equal(caption.text, caption.text.toUpperCase());
  assert.match(proposed[0]?.text ?? "", /\(INTERVIEW 1\)$/);
  // Nothing lands before the approval: the preview ran, the timeline holds only its sample caption.
  assert.deepEqual([...(await timelineCaptions()).keys()], ["Hello"]);

  // The approver shortens the first caption; the others land as proposed.
  const edited = [{ ...proposed[0], text: "WELCOME BACK" } as Caption, ...proposed.slice(1)];
  await client.resume("ada-1", { [approval.id]: { approved: true, editedArgs: { captions: edited } } });
  const first = await settled(client, "ada-1");
  assert.equal(first.status, "completed", JSON.stringify(first));
  assert.equal(first.state.outcome, "captioned");
  assert.equal(first.state.style, "uppercase");
  assert.equal(transcriptions("interview.wav"), 1);
  const afterFirst = await timelineCaptions();
  for (const caption of edited) assert.equal(afterFirst.get(caption.text), 1, caption.text);
  assert.equal(afterFirst.has(proposed[0]?.text ?? ""), false, "the approver's edit replaced the proposal");

  // Run 2: no style said; the memory node answers it. The driver dies right after the transcription ran.
  await client.start(
    "video-assistant",
    { userId: "ada", media: "outro.wav", request: "Caption outro.wav" },
    { threadId: "ada-2", runId: "ada-2" },
  );
  const deadline = Date.now() + underLoadMs(120_000);
  while (transcriptions("outro.wav") === 0) {
    assert.ok(Date.now() < deadline, "outro.wav was never transcribed");
    await sleep(20);
  }
  await driver.stop("SIGKILL");
  driver = await startDriver(layout, nats.url, { leaseMs: 2000 });
  procs.push(driver);
  client = createDurableClient({ baseUrl: driver.url });
  // The new driver's sweep takes the run over once its lease has passed, and it pauses at the approval.
  let second = await settled(client, "ada-2");
  const pausedDeadline = Date.now() + underLoadMs(120_000);
  while (second.status !== "paused" && Date.now() < pausedDeadline) {
    await sleep(250);
    second = await settled(client, "ada-2");
  }
  assert.equal(second.status, "paused", JSON.stringify(second));
  const [again] = second.interrupts;
  assert.ok(again !== undefined);
  const outro = (again.request as { params: { captions: Caption[] } }).params.captions;
  for (const caption of outro) assert.equal(caption.text, caption.text.toUpperCase(), "the remembered style");
  await client.resume("ada-2", { [again.id]: { approved: true } });
  const done = await settled(client, "ada-2");
  assert.equal(done.status, "completed", JSON.stringify(done));
  assert.equal(done.state.style, "uppercase");
  // The re-run step got the transcription from the module's results ledger: it ran once.
  assert.equal(transcriptions("outro.wav"), 1);
  const afterSecond = await timelineCaptions();
  for (const caption of outro) assert.equal(afterSecond.get(caption.text), 1, caption.text);
  for (const caption of edited) assert.equal(afterSecond.get(caption.text), 1, caption.text);
  // The style was remembered once, however often the runs asked.
  const styles = await viewer.call("memory.memory_search", {
    userId: "ada",
    query: "caption style",
    kinds: ["preference"],
  });
  assert.ok(styles.ok);
  assert.deepEqual(
    (styles.output as { results: { text: string }[] }).results.map((hit) => hit.text),
    ["Caption style: uppercase"],
  );
});
