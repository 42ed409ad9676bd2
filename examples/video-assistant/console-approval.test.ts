/**
 * The video assistant's paused runs approved from the console page, in Chromium: the example's own
 * graph (`createAssistantGraph`) on a durable HTTP server as `driver.ts` serves it, its mesh tools
 * answered in process (the two nodes, the broker and Python are the end-to-end test's business:
 * `video-assistant.test.ts`), and `tackle serve --durable-url` pointing the runs page at that server.
 * A person edits a caption in the form drawn from the approval's JSON Schema and approves; another run
 * is rejected with a reason. axe-core after every step.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createMemoryStore, createRunner, type Runner } from "@tackle/durable";
import { type DurableServer, serveDurable } from "@tackle/durable/http";
import type { MeshClient } from "@tackle/mesh";
import { underLoadMs } from "@tackle/test-support";
import type { Page } from "playwright-core";
import { type ConsoleUnderTest, openConsole } from "../../packages/cli/test/browser/console-under-test.ts";
import { type Caption, createAssistantGraph, graphName } from "./agent.ts";

const segments: Caption[] = [
  { startMs: 0, durationMs: 1500, text: "Hello and welcome" },
  { startMs: 1500, durationMs: 1200, text: "to the interview" },
];
/** The edit scripts that asked to land (auto_commit), in order. */
const committed: string[] = [];
const calls: string[] = [];

/** The mesh as the graph sees it: each tool answered here, as the modules would. */
const mesh = {
  async call(name: string, args: Record<string, unknown>) {
    calls.push(name);
    const answer = (output: unknown) => ({ ok: true as const, output });
    if (name === "memory.memory_search") return answer({ results: [] });
    if (name === "memory.memory_add") return answer({ id: "m-1" });
    if (name === "transcribe.transcribe") return answer({ segments });
    if (name === "docscript.edit" && args.auto_commit === true) {
      committed.push(String(args.script));
      return answer({ plan_id: `plan-${committed.length}`, commit: { status: "committed" } });
    }
    if (name === "docscript.edit") return answer({ plan_id: "preview-1" });
    throw new Error(`unexpected tool ${name}`);
  },
} as unknown as MeshClient;

let runner: Runner;
let server: DurableServer;
let ui: ConsoleUnderTest;
let page: Page;
const step = (what: string) => ui.step(what);

async function startRun(threadId: string, request: string): Promise<void> {
  const response = await fetch(`${server.url}/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      graph: graphName,
      threadId,
      runId: `${threadId}-run`,
      input: { userId: "ada", media: "interview.wav", request },
    }),
  });
  assert.equal(response.status, 201, await response.text());
  await waitForStatus(threadId, "paused");
}

async function readRun(threadId: string): Promise<{ status: string; state: Record<string, unknown> }> {
  const response = await fetch(`${server.url}/runs/${threadId}`);
  return (await response.json()) as { status: string; state: Record<string, unknown> };
}

async function waitForStatus(threadId: string, status: string): Promise<void> {
  const deadline = Date.now() + underLoadMs(30_000);
  for (;;) {
    const run = await readRun(threadId);
    if (run.status === status) return;
    assert.ok(Date.now() < deadline, `${threadId} is ${run.status}, not ${status}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

before(async () => {
  runner = createRunner({ store: createMemoryStore(), graphs: [createAssistantGraph({ mesh })] });
  server = await serveDurable({ runner });
  await startRun("ada-1", "Caption interview.wav in uppercase please");
  ui = await openConsole({ env: { TACKLE_CONSOLE_DURABLE_URL: server.url } });
  page = ui.page;
  await page.goto(ui.signInUrl());
  await page
    .getByRole("heading", { name: "Modules and tools", level: 1 })
    .waitFor({ timeout: underLoadMs(15_000) });
  await step("signing in");
});

after(async () => {
  await ui?.close();
  await server?.close();
  await runner?.close();
});

describe("the video assistant's approvals on the console page", () => {
  test("a paused run is listed, its captions edited in the schema form and approved; the edit lands", async () => {
    await page.goto(`${ui.origin}/#/runs`);
    await step("opening the runs page");
    const row = page.locator('#runs tr[data-thread="ada-1"]');
    await row.waitFor({ timeout: underLoadMs(15_000) });
    assert.match(await row.innerText(), /video-assistant[\s\S]*paused/);
    assert.match(await page.locator("main").innerText(), new RegExp(`durable server at ${server.url}`));
    assert.equal(await page.getByRole("button", { name: "Start the demo agent" }).isVisible(), false);
    await row.getByRole("link", { name: "ada-1" }).click();
    await step("opening run ada-1");

    const approval = page.locator("article.approval");
    await approval.waitFor({ timeout: underLoadMs(20_000) });
    assert.match(await approval.innerText(), /Add 2 captions to the timeline\?/);
    assert.match(await approval.innerText(), /"text": "HELLO AND WELCOME"/);
    // The transcription, the memory calls and the preview are the run's tool cards, completed.
    const transcribe = page.locator("article.tool-card").filter({ hasText: "transcribe.transcribe" });
    assert.equal(await transcribe.getAttribute("data-status"), "completed");

    // The form is drawn from the approval's JSON Schema: a group per caption, filled in as proposed.
    const edit = approval.getByRole("form", { name: "Edit the arguments" });
    assert.equal(await edit.getAttribute("data-form"), "schema");
    const first = edit.getByRole("group", { name: "captions 1" });
    assert.equal(await first.getByLabel("text *").inputValue(), "HELLO AND WELCOME");
    await first.getByLabel("text *").fill("HELLO!");
    await step('filling the first caption\'s "text *"');
    await edit.getByRole("button", { name: "Approve with these arguments" }).click();
    await step('clicking "Approve with these arguments"');
    await page
      .locator(".run-status")
      .filter({ hasText: "Completed" })
      .waitFor({ timeout: underLoadMs(20_000) });
    assert.match(await page.locator(".run-status").innerText(), /captioned/);
    await step("the run completed");

    // The edited caption is the one that landed; the other as proposed.
    assert.equal(committed.length, 1);
    assert.match(committed[0] ?? "", /"text":"HELLO!"/);
    assert.match(committed[0] ?? "", /"text":"TO THE INTERVIEW"/);
    assert.doesNotMatch(committed[0] ?? "", /HELLO AND WELCOME/);
    const run = await readRun("ada-1");
    assert.equal(run.status, "completed");
    assert.equal(run.state.outcome, "captioned");
    await page
      .locator('#runs tr[data-thread="ada-1"] .badge')
      .filter({ hasText: /^completed$/ })
      .waitFor({ timeout: underLoadMs(10_000) });
    assert.deepEqual(ui.errors, []);
  });

  test("a run rejected from the page ends declined with the reason typed; nothing lands", async () => {
    await startRun("ada-2", "Caption outro.wav");
    await page.goto(`${ui.origin}/#/runs`);
    await step("opening the runs page");
    const row = page.locator('#runs tr[data-thread="ada-2"]');
    await row.waitFor({ timeout: underLoadMs(15_000) });
    await row.getByRole("link", { name: "ada-2" }).click();
    await step("opening run ada-2");
    const approval = page.locator("article.approval");
    await approval.waitFor({ timeout: underLoadMs(20_000) });
    await approval.getByLabel("Reason for rejecting").fill("the speaker asked for no captions");
    await step('filling "Reason for rejecting"');
    await approval.getByRole("button", { name: "Reject" }).click();
    await step('clicking "Reject"');
    await page
      .locator(".run-status")
      .filter({ hasText: "declined" })
      .waitFor({ timeout: underLoadMs(20_000) });
    await step("the run declined");
    const run = await readRun("ada-2");
    assert.equal(run.status, "completed");
    assert.equal(run.state.outcome, "declined");
    assert.equal(run.state.reason, "the speaker asked for no captions");
    assert.equal(committed.length, 1, "the rejected captions never landed");
    assert.deepEqual(ui.errors, []);
  });
});
