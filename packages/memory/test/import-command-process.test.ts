/**
 * `tackle-memory import` as a user runs it (ADR 0544), against `tackle-memory serve` as its own
 * process over real HTTP: the fixture exports stored and searchable, a second run stores nothing new,
 * a file that is not such an export exits 2 naming the problem, a wrong key exits 1 with the service's
 * message; and a conversation cut into several jobs, one failing past a quota, stops the command
 * there, so the run that resumes it keeps the conversation's turns in order.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { MemoryClient } from "@tackle/memory";
import { IMPORT_LIMITS } from "@tackle/memory/schemas";
import { freePort, underLoadMs } from "@tackle/test-support";
import { killAllStarted, main, type Running, startService, stop } from "./support/service-process.ts";

const fixture = (name: string) =>
  fileURLToPath(new URL(`./fixtures/${name}/conversations.json`, import.meta.url));
const directory = mkdtempSync(join(tmpdir(), "tackle-memory-import-command-"));
const children: Running[] = [];
after(async () => {
  for (const running of children) await stop(running, "SIGKILL");
  killAllStarted();
  rmSync(directory, { recursive: true, force: true });
});

async function serve(store: string, port: number, flags: string[] = []) {
  const running = await startService(["--store", store, "--listen", `127.0.0.1:${port}`, ...flags], {
    TACKLE_MEMORY_API_KEYS: "import-key=t",
  });
  children.push(running);
  return running;
}

/** Runs `tackle-memory import …` to its exit, within a deadline. */
function runImport(args: string[], environment: Record<string, string> = {}) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--conditions=@tackle/source", main, "import", ...args], {
      env: { PATH: process.env.PATH ?? "", ...environment },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += String(chunk);
    });
    child.stderr.on("data", (chunk) => {
      stderr += String(chunk);
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`tackle-memory import ${args.join(" ")} did not exit: ${stdout}${stderr}`));
    }, underLoadMs(180_000));
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const clientOf = (url: string) =>
  new MemoryClient({ baseUrl: url, apiKey: "import-key", allowPrivateNetwork: true });

async function sessionTexts(client: MemoryClient, userId: string, sessionId: string) {
  const texts: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.recallConversation({
      userId,
      sessionId,
      order: "asc",
      limit: 200,
      ...(cursor === undefined ? {} : { cursor }),
    });
    texts.push(...page.events.map((event) => event.content));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return texts;
}

describe("tackle-memory import: the fixture exports", () => {
  it("imports the ChatGPT and Claude fixtures, searchable; a second run stores nothing new", async () => {
    const running = await serve(join(directory, "fixtures.db"), await freePort());
    const client = clientOf(running.url);
    const chatgpt = await runImport([
      fixture("chatgpt-export"),
      "--format",
      "chatgpt-export",
      "--user",
      "ada",
      "--url",
      running.url,
      "--api-key",
      "import-key",
    ]);
    assert.equal(chatgpt.code, 0, chatgpt.stderr);
    assert.match(
      chatgpt.stdout,
      /^job 1\/1 \(\S+\): 2 conversations, turns 9 created, 0 existing, 3 skipped/m,
    );
    assert.match(
      chatgpt.stdout,
      /imported .*conversations\.json \(chatgpt-export\) for user ada: 2 conversations in 1 job, turns 9 created, 0 existing, 3 skipped/,
    );
    // The Claude export told apart by its shape; the service and key from the environment.
    const environment = { TACKLE_MEMORY_URL: running.url, TACKLE_MEMORY_API_KEY: "import-key" };
    const claude = await runImport(
      [fixture("claude-export"), "--user", "grace", "--agent", "baker"],
      environment,
    );
    assert.equal(claude.code, 0, claude.stderr);
    assert.match(
      claude.stdout,
      /\(claude-export\) for user grace and agent baker: .*turns 3 created, 0 existing/,
    );

    const lisbon = await sessionTexts(client, "ada", "import:6650b1f2-0c4d-8001-a1b2-4c1e5d6f7a8b");
    assert.match(lisbon[0] ?? "", /^I'm planning a trip to Lisbon in May/);
    const sourdough = await sessionTexts(client, "grace", "import:1c7f3a9e-5b2d-4e8a-9c1f-0d3e5a7b9c2e");
    assert.equal(sourdough.at(-1), "Great. My oven only goes up to 230C, by the way.");
    // What the user said is found by a search, as memories inferred from their turns.
    const vegetarian = await client.search({ userId: "ada", query: "vegetarian food" });
    assert.ok(
      vegetarian.results.some((result) => /vegetarian/i.test(result.memory.content)),
      JSON.stringify(vegetarian.results.map((result) => result.memory.content)),
    );
    const oven = await client.search({ userId: "grace", agentId: "baker", query: "oven temperature" });
    assert.ok(
      oven.results.some((result) => /230C/.test(result.memory.content)),
      JSON.stringify(oven.results.map((result) => result.memory.content)),
    );

    const again = await runImport([fixture("chatgpt-export"), "--user", "ada"], environment);
    assert.equal(again.code, 0, again.stderr);
    assert.match(
      again.stdout,
      /for user ada: 2 conversations in 1 job, turns 0 created, 9 existing, 3 skipped/,
    );
    const claudeAgain = await runImport(
      [fixture("claude-export"), "--user", "grace", "--agent", "baker"],
      environment,
    );
    assert.match(claudeAgain.stdout, /turns 0 created, 3 existing/);
  });
});

describe("tackle-memory import: refused files and keys", () => {
  it("exits 2 naming a file that is not such an export, and 1 with the service's word on a wrong key", async () => {
    const running = await serve(join(directory, "refusals.db"), await freePort());
    const environment = { TACKLE_MEMORY_URL: running.url, TACKLE_MEMORY_API_KEY: "import-key" };
    const notJson = join(directory, "not-json.json");
    writeFileSync(notJson, "{ this is not json");
    const looping = join(directory, "looping.json");
    const node = (parent: string, text: string) => ({
      parent,
      message: { author: { role: "user" }, content: { content_type: "text", parts: [text] } },
    });
    writeFileSync(
      looping,
      JSON.stringify([
        { id: "looping", mapping: { a: node("b", "one"), b: node("a", "two") }, current_node: "b" },
      ]),
    );
    const neither = join(directory, "neither.json");
    writeFileSync(neither, JSON.stringify([{ messages: [] }]));
    for (const [args, says] of [
      [[notJson, "--user", "ada"], /not-json\.json is not JSON/],
      [[join(directory, "missing.json"), "--user", "ada"], /cannot read .*missing\.json/],
      [
        [fixture("claude-export"), "--user", "ada", "--format", "chatgpt-export"],
        /claude-export\/conversations\.json is a claude-export, not a chatgpt-export/,
      ],
      [
        [looping, "--user", "ada"],
        /looping\.json is not a chatgpt-export .*conversation "looping": its parent links loop/,
      ],
      [[neither, "--user", "ada"], /neither\.json is neither a ChatGPT export .* nor a Claude export/],
      [[fixture("claude-export")], /--user <id> is required/],
      [[fixture("claude-export"), "--user", "ada", "--timeout", "soon"], /--timeout takes seconds/],
    ] as const) {
      const run = await runImport([...args], environment);
      assert.equal(run.code, 2, `${args.join(" ")}: ${run.stderr}`);
      assert.match(run.stderr, says);
    }
    const { jobs } = await clientOf(running.url).listJobs({ type: "import" });
    assert.equal(jobs.length, 0, "no import was started for a refused file");

    const wrongKey = await runImport(
      [fixture("claude-export"), "--user", "ada", "--api-key", "not-the-key"],
      {
        TACKLE_MEMORY_URL: running.url,
      },
    );
    assert.equal(wrongKey.code, 1, wrongKey.stderr);
    assert.match(wrongKey.stderr, /Send a valid API key/);
    assert.match(wrongKey.stderr, /nothing stored so far \(0 of 1 jobs done\)/);

    const help = await runImport(["--help"]);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /usage: tackle-memory import <conversations\.json> --user <id>/);
  });
});

describe("tackle-memory import: an export cut into several jobs", () => {
  it("waits for each job: a failed part stops the command, and running it again resumes in order", async () => {
    const turns = 450;
    const mapping: Record<string, unknown> = { root: { parent: null, message: null } };
    for (let index = 0; index < turns; index += 1) {
      mapping[`m${index}`] = {
        parent: index === 0 ? "root" : `m${index - 1}`,
        message: {
          author: { role: index % 2 === 0 ? "user" : "assistant" },
          content: {
            content_type: "text",
            parts: [`Turn ${index}: ${"lisbon tram pastel de nata ".repeat(700)}`],
          },
          create_time: 1714550400 + index,
        },
      };
    }
    const file = join(directory, "long-conversations.json");
    const exported = JSON.stringify([{ id: "long", title: "Long", mapping, current_node: `m${turns - 1}` }]);
    assert.ok(Buffer.byteLength(exported) > 2 * IMPORT_LIMITS.bytes, "the conversation is cut in three");
    writeFileSync(file, exported);
    const store = join(directory, "long.db");
    const port = await freePort();
    const args = [file, "--user", "long", "--no-infer"];
    // A quota the first part (~210 turns) fits and the second does not: it stores one batch of 100.
    const tight = await serve(store, port, ["--max-events", "350"]);
    const environment = { TACKLE_MEMORY_URL: tight.url, TACKLE_MEMORY_API_KEY: "import-key" };
    const failed = await runImport(args, environment);
    assert.equal(failed.code, 1, failed.stderr);
    assert.match(failed.stdout, /^job 1\/3 \(\S+\): 1 conversation, turns \d+ created/m);
    assert.match(failed.stderr, /job 2\/3 \(\S+\) failed: quota_exceeded/);
    assert.match(
      failed.stderr,
      /stored so far \(1 of 3 jobs done\): turns \d+ created, 0 existing, 0 skipped, 0 memories/,
    );
    assert.match(failed.stderr, /run the same command again to resume/);
    const client = clientOf(tight.url);
    assert.equal((await client.listJobs({ type: "import" })).jobs.length, 2, "the third part was never sent");
    // What it says was stored (the first part and the second's first batch) is what the session holds.
    const stored = (await sessionTexts(client, "long", "import:long")).length;
    assert.match(failed.stderr, new RegExp(`: turns ${stored} created`));
    assert.ok(stored > 200 && stored < 350, `${stored} stored`);
    await stop(tight, "SIGTERM");

    const roomy = await serve(store, port);
    const resumed = await runImport(args, environment);
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.match(resumed.stdout, /1 conversation in 3 jobs, turns \d+ created, \d+ existing, 0 skipped/);
    const counts = /turns (\d+) created, (\d+) existing/.exec(resumed.stdout.split("\n").at(-2) ?? "");
    assert.equal(Number(counts?.[1]) + Number(counts?.[2]), turns);
    const texts = await sessionTexts(clientOf(roomy.url), "long", "import:long");
    assert.deepEqual(
      texts.map((text) => text.slice(0, text.indexOf(":"))),
      Array.from({ length: turns }, (_, index) => `Turn ${index}`),
      "the cut conversation's turns in the order said",
    );
    // Each job of the resumed run was started once the one before it had finished.
    const jobs = (await clientOf(roomy.url).listJobs({ type: "import" })).jobs
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt))
      .slice(-3);
    for (const [index, job] of jobs.entries()) {
      assert.equal(job.status, "succeeded");
      const next = jobs[index + 1];
      if (next) assert.ok(job.finishedAt! <= next.createdAt, `${job.finishedAt} <= ${next.createdAt}`);
    }
    // A job that outlasts --timeout stops the command, naming it, rather than waiting on.
    const impatient = await runImport(
      [file, "--user", "slow", "--no-infer", "--timeout", "0.001"],
      environment,
    );
    assert.equal(impatient.code, 1, impatient.stderr);
    assert.match(
      impatient.stderr,
      /job 1\/3: job \S+ did not finish within 0\.001 s \(--timeout\); it may still be running/,
    );
    assert.match(impatient.stderr, /run the same command again to resume/);
  });
});
