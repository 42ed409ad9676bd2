/**
 * `tackle-memory serve`'s limits as a process takes them: quotas and retention set by flag or by
 * environment variable hold over real HTTP (a write past a tiny quota is 409 quota_exceeded, traces are
 * cut to the newest few); a value that is not a limit stops the start, exit 2, naming its flag, before
 * the store is opened. The README's examples of them start as written.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { freePort, underLoadMs } from "@tackle/test-support";
import { killAllStarted, main, type Running, startService, stop } from "./support/service-process.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-limits-"));
const children: Running[] = [];
after(async () => {
  for (const running of children) await stop(running, "SIGKILL");
  killAllStarted();
  rmSync(directory, { recursive: true, force: true });
});

const call = async (url: string, path: string, body?: object) => {
  const response = await fetch(`${url}${path}`, {
    method: body ? "POST" : "GET",
    headers: { authorization: "Bearer limits-key", "content-type": "application/json" },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, body: (await response.json()) as Answer };
};

/** The parts of the answers read here. */
interface Answer {
  readonly error: { readonly code: string; readonly data: unknown };
  readonly quotas: Readonly<Record<string, { readonly limit: number | null }>>;
  readonly traces: readonly unknown[];
}

const limitsOf = (answer: Answer) =>
  Object.fromEntries(Object.entries(answer.quotas).map(([kind, usage]) => [kind, usage.limit]));

/** Runs the bin to its exit; one that comes up instead is stopped and answers `started`. */
function run(args: string[], environment: Record<string, string>) {
  return new Promise<{ code: number | null | "started"; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--conditions=@tackle/source", main, "serve", ...args], {
      env: { PATH: process.env.PATH ?? "", TACKLE_MEMORY_API_KEYS: "k=t", ...environment },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk) => {
      stderr += String(chunk);
    });
    let started = false;
    child.stdout.on("data", (chunk) => {
      if (!String(chunk).includes("listening")) return;
      started = true;
      child.kill("SIGKILL");
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`tackle-memory serve ${args.join(" ")} did not exit: ${stderr}`));
    }, underLoadMs(60_000));
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code: started ? "started" : code, stderr });
    });
  });
}

/** The README's commands after `marker`: environment assignments and arguments, continuations joined. */
function readmeCommands(marker: string) {
  const readme = readFileSync(fileURLToPath(new URL("../README.md", import.meta.url)), "utf8");
  const from = readme.indexOf(marker);
  assert.ok(from >= 0, `the README has ${marker}`);
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(from))?.[1] ?? "";
  const lines = block
    .replace(/\\\n\s*/g, "")
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.trim().startsWith("#"));
  return lines.map((line) => {
    const words = line.trim().split(/\s+/);
    const start = words.indexOf("npx");
    assert.deepEqual(words.slice(start, start + 3), ["npx", "tackle-memory", "serve"], line);
    const environment = Object.fromEntries(words.slice(0, start).map((word) => word.split("=", 2)));
    return { environment: environment as Record<string, string>, args: words.slice(start + 3) };
  });
}

describe("tackle-memory serve: limits held over HTTP", () => {
  it("quotas and retention set by flag and by environment hold over HTTP: 409 quota_exceeded past a tiny quota, traces cut", async () => {
    const running = await startService(
      [
        "--store",
        join(directory, "limits.db"),
        "--listen",
        `127.0.0.1:${await freePort()}`,
        "--max-memories",
        "2",
        "--max-memory-bytes",
        "1KiB",
        "--max-events",
        "off",
        "--max-traces-per-tenant",
        "3",
        "--max-traces-per-user",
        "2",
      ],
      {
        TACKLE_MEMORY_API_KEYS: "limits-key=tenant-limits",
        TACKLE_MEMORY_MAX_DOCUMENT_BYTES: "40",
        TACKLE_MEMORY_MAX_CORE_BLOCK_BYTES: "1KiB",
        TACKLE_MEMORY_MAX_METADATA_BYTES: "64",
      },
    );
    children.push(running);
    // Metadata (ADR 0556): its JSON text, 65 bytes, one too many; nothing of the memory is kept.
    const tagged = await call(running.url, "/v1/memories", {
      userId: "u",
      content: "A fact with its notes",
      metadata: { note: "n".repeat(54) },
    });
    assert.equal(tagged.status, 409);
    assert.deepEqual(tagged.body.error.data, { kind: "metadataBytes", limit: 64, used: 0, requested: 65 });
    for (const content of ["The first fact", "The second fact"]) {
      assert.equal((await call(running.url, "/v1/memories", { userId: "u", content })).status, 200);
    }
    const refused = await call(running.url, "/v1/memories", { userId: "u", content: "The third fact" });
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error.code, "quota_exceeded");
    assert.deepEqual(refused.body.error.data, { kind: "memories", limit: 2, used: 2, requested: 1 });

    const document = await call(running.url, "/v1/knowledge/documents", {
      userId: "u",
      title: "Manual",
      content: "A manual of forty-one bytes, one too many",
    });
    assert.equal(document.status, 409);
    assert.deepEqual(document.body.error.data, { kind: "documentBytes", limit: 40, used: 0, requested: 41 });

    // Core blocks (ADR 0551): a block of 1,025 bytes over every scope is one byte too many.
    const block = await call(running.url, "/v1/core-memory", {
      userId: "u",
      edits: [{ op: "create", label: "notes", limit: 2000, text: "b".repeat(1025) }],
    });
    assert.equal(block.status, 409);
    assert.deepEqual(block.body.error.data, {
      kind: "coreBlockBytes",
      limit: 1024,
      used: 0,
      requested: 1025,
    });

    assert.deepEqual(limitsOf((await call(running.url, "/v1/status")).body), {
      memories: 2,
      memoryBytes: 1024,
      events: null,
      eventBytes: 4 * 1024 ** 3,
      documentBytes: 40,
      metadataBytes: 64,
      coreBlocks: 10_000,
      coreBlockBytes: 1024,
      queuedJobs: 100,
    });

    // Two users of four searches each, in turn: each keeps its newest 2 (`--max-traces-per-user`; a
    // tenth of the tenant's, 1, without it: ADR 0545), and the tenant the newest 3 of those.
    const users = ["u", "v"];
    for (let search = 0; search < 8; search += 1) {
      const userId = users[search % users.length];
      const searched = await call(running.url, "/v1/memories/search", { userId, query: "fact" });
      assert.equal(searched.status, 200);
    }
    // Cut after the searches answered, off their answers: waited for, with a deadline.
    const deadline = Date.now() + underLoadMs(10_000);
    let traces: number[] = [];
    while (Date.now() < deadline) {
      traces = [];
      for (const userId of users) {
        traces.push((await call(running.url, `/v1/traces?userId=${userId}&limit=200`)).body.traces.length);
      }
      if (traces.reduce((sum, count) => sum + count, 0) <= 3) break;
      await sleep(50);
    }
    assert.deepEqual(traces, [1, 2], "the newest 3 traces kept of 8, at most 2 a user");
    assert.equal(await stop(running, "SIGTERM"), 0);
  });
});

describe("tackle-memory serve: limits in the README", () => {
  it("the README's examples of limits start as written, each limit as it says", async () => {
    const commands = readmeCommands("Retention and storage quotas");
    assert.equal(commands.length, 2);
    for (const [index, { environment, args }] of commands.entries()) {
      const store = ["--store", join(directory, `readme-${index}.db`)];
      const running = await startService([...args, ...store, "--listen", `127.0.0.1:${await freePort()}`], {
        ...environment,
        TACKLE_MEMORY_API_KEYS: "limits-key=tenant-limits",
      });
      children.push(running);
      const limits = limitsOf((await call(running.url, "/v1/status")).body);
      if (index === 1) {
        assert.deepEqual(limits, {
          memories: 50_000,
          memoryBytes: 100 * 1024 ** 2,
          events: null,
          eventBytes: 512 * 1024 ** 2,
          documentBytes: 1024 ** 3,
          metadataBytes: 1024 ** 3,
          coreBlocks: 10_000,
          coreBlockBytes: 64 * 1024 ** 2,
          queuedJobs: 100,
        });
      }
      assert.equal(await stop(running, "SIGTERM"), 0);
    }
  });
});

describe("tackle-memory serve: limits refused at start", () => {
  it("a value that is not a limit stops the start, exit 2, naming its flag, before the store is opened", async () => {
    const cases: [string[], Record<string, string>, RegExp][] = [
      [
        ["--max-memories", "lots"],
        {},
        /--max-memories \/ TACKLE_MEMORY_MAX_MEMORIES takes a whole number of 0 or more, or off, got "lots"/,
      ],
      [["--max-memory-bytes", "1GB"], {}, /--max-memory-bytes .* may end in KiB, MiB, GiB or TiB.*got "1GB"/],
      [["--max-in-flight", "0"], {}, /--max-in-flight \/ TACKLE_MEMORY_MAX_IN_FLIGHT .* at least 1, got "0"/],
      [["--max-traces-per-tenant", "off"], {}, /--max-traces-per-tenant .* at least 1, got "off"/],
      [
        [],
        { TACKLE_MEMORY_TRACE_RETENTION_DAYS: "1.5" },
        /--trace-retention-days .* days, at least 1, got "1.5"/,
      ],
      [
        [],
        { TACKLE_MEMORY_RATE_LIMIT: "ten" },
        /--rate-limit \/ TACKLE_MEMORY_RATE_LIMIT takes .* got "ten"/,
      ],
    ];
    for (const [args, environment, message] of cases) {
      const store = join(directory, "refused", "memory.db");
      const outcome = await run(["--store", store, "--listen", "127.0.0.1:0", ...args], environment);
      const given = `${args.join(" ")} ${JSON.stringify(environment)}`;
      assert.equal(outcome.code, 2, `${given}: ${outcome.stderr}`);
      assert.match(outcome.stderr, message, given);
      assert.match(outcome.stderr, /^usage: tackle-memory serve/m, `${given}: the usage follows`);
      assert.equal(existsSync(store), false, `${given}: no store was opened`);
    }
  });
});
