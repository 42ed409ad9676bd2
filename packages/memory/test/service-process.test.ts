/** The service as its own process (the `tackle-memory serve` bin): data survives a kill and restart. */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { MemoryClient } from "@tackle/memory";
import {
  createTestDatabase,
  freePort,
  type TestDatabase,
  testPostgresUrl,
  underLoadMs,
} from "@tackle/test-support";
import pg from "pg";
import { killAllStarted, main, type Running, startService, stop } from "./support/service-process.ts";

async function exercise(url: string, apiKey: string) {
  const client = new MemoryClient({ baseUrl: url, apiKey, allowPrivateNetwork: true });
  const { memory } = await client.add({ userId: "u", content: "The restart test's favourite number is 42" });
  await client.writeEvent({
    userId: "u",
    sessionId: "s",
    role: "user",
    content: "remember me",
    customId: "e-1",
    infer: false,
  });
  await client.selfEdit({
    userId: "u",
    edits: [{ op: "append", label: "human", text: "survives restarts" }],
  });
  return memory.id;
}

async function verify(url: string, apiKey: string, memoryId: string) {
  const client = new MemoryClient({ baseUrl: url, apiKey, allowPrivateNetwork: true });
  assert.equal(
    (await client.getMemory(memoryId)).memory.content,
    "The restart test's favourite number is 42",
  );
  assert.equal(
    (await client.search({ userId: "u", query: "favourite number" })).results[0]?.memory.id,
    memoryId,
  );
  const again = await client.writeEvent({
    userId: "u",
    sessionId: "s",
    role: "user",
    content: "remember me",
    customId: "e-1",
  });
  assert.equal(again.created, false, "the custom id is still known after the restart");
  const blocks = (await client.selfEdit({ userId: "u", edits: [] })).blocks;
  assert.equal(blocks.find((block) => block.label === "human")?.value, "survives restarts");
}

/**
 * Sends an add under `key` to a service started with TACKLE_MEMORY_TEST_STALL_BEFORE_COMMIT=1, waits
 * until the write is done but not committed, and kills the process there.
 */
async function killBetweenWriteAndAnswer(running: Running, apiKey: string, key: string, content: string) {
  const outcome = fetch(`${running.url}/v1/memories`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${apiKey}`,
      "idempotency-key": key,
      "content-type": "application/json",
    },
    body: JSON.stringify({ userId: "u", kind: "episode", content }),
  }).then(
    (response) => response.status,
    (error: unknown) => error,
  );
  await running.stderrLine(/stalledBeforeCommit/, underLoadMs(10_000));
  await stop(running, "SIGKILL");
  assert.ok((await outcome) instanceof Error, "the caller of the killed process never got an answer");
}

/** The retry under the same key on a restarted process: a definite answer, one memory, promptly. */
async function retryAfterKill(url: string, apiKey: string, key: string, content: string) {
  const client = new MemoryClient({ baseUrl: url, apiKey, allowPrivateNetwork: true, maxRetries: 0 });
  const started = Date.now();
  const retried = await client.add({ userId: "u", kind: "episode", content }, { idempotencyKey: key });
  assert.ok(Date.now() - started < underLoadMs(5000), "answered at once, not held until the key expires");
  assert.equal(retried.created, true);
  assert.equal(retried.replayed, undefined, "the killed attempt stored nothing: the retry ran the write");
  const again = await client.add({ userId: "u", kind: "episode", content }, { idempotencyKey: key });
  assert.equal(again.replayed, true);
  assert.equal(again.memory.id, retried.memory.id);
  assert.equal((await client.unifiedState({ userId: "u" })).counts.memories.active, 1, "exactly one stored");
}

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-process-"));
const children: Running[] = [];
let database: TestDatabase | undefined;
after(async () => {
  for (const running of children) await stop(running, "SIGKILL");
  killAllStarted();
  await database?.drop();
  rmSync(directory, { recursive: true, force: true });
});

describe("memory service process: SQLite and key files", () => {
  it("SQLite: data survives SIGKILL and a restart of the process", async () => {
    const port = await freePort();
    const store = join(directory, "data", "memory.db");
    const args = ["--store", store, "--listen", `127.0.0.1:${port}`];
    const first = await startService(args, {});
    children.push(first);
    const keyFile = join(directory, "data", "memory-api-key");
    assert.equal(statSync(keyFile).mode & 0o777, 0o600, "the generated key file is private");
    const apiKey = readFileSync(keyFile, "utf8").trim();
    const memoryId = await exercise(first.url, apiKey);
    await stop(first, "SIGKILL");
    const second = await startService(args, {});
    children.push(second);
    await verify(second.url, apiKey, memoryId);
    assert.equal(await stop(second, "SIGTERM"), 0, "SIGTERM closes cleanly");
  });

  it("SQLite: a process killed between a keyed write and its answer stored neither; the retry runs it once", async () => {
    const port = await freePort();
    const store = join(directory, "killed", "memory.db");
    const args = ["--store", store, "--listen", `127.0.0.1:${port}`];
    const environment = { TACKLE_MEMORY_API_KEYS: "kill-key=tenant-kill" };
    const stalled = await startService(args, { ...environment, TACKLE_MEMORY_TEST_STALL_BEFORE_COMMIT: "1" });
    children.push(stalled);
    const content = "Ada: Haha, totally.";
    await killBetweenWriteAndAnswer(stalled, "kill-key", "turn-12", content);
    const file = new DatabaseSync(store, { readOnly: true });
    try {
      assert.equal(
        file.prepare("SELECT COUNT(*) AS n FROM memory_memories").get()?.n,
        0,
        "the write was rolled back",
      );
      assert.equal(
        file.prepare("SELECT COUNT(*) AS n FROM memory_idempotency_keys").get()?.n,
        0,
        "no key is held",
      );
    } finally {
      file.close();
    }
    const restarted = await startService(args, environment);
    children.push(restarted);
    await retryAfterKill(restarted.url, "kill-key", "turn-12", content);
    await stop(restarted, "SIGTERM");
  });

  it("a key file's bound key acts only as its user; an unbound key of the tenant acts for anyone; a bad binding stops the start", async () => {
    const keys = join(directory, "bound-keys");
    writeFileSync(
      keys,
      "# the back office, then Alice's app\nkey-office=acme\nkey-alice=acme?userId=alice\n",
      {
        mode: 0o600,
      },
    );
    const args = ["--store", join(directory, "bound.db"), "--listen", `127.0.0.1:${await freePort()}`];
    const running = await startService([...args, "--api-keys-file", keys], {});
    children.push(running);
    const office = new MemoryClient({
      baseUrl: running.url,
      apiKey: "key-office",
      allowPrivateNetwork: true,
    });
    const alice = new MemoryClient({ baseUrl: running.url, apiKey: "key-alice", allowPrivateNetwork: true });
    const bobs = await office.add({ userId: "bob", content: "Bob's door code is 4711" });
    const own = await alice.add({ content: "Alice's door code is 1234" });
    assert.equal(own.memory.userId, "alice", "the key's user is filled in");
    await assert.rejects(alice.search({ userId: "bob", query: "door code" }), (error: Error) => {
      assert.equal((error as { code?: string }).code, "scope_forbidden");
      assert.equal((error as { status?: number }).status, 403);
      return true;
    });
    await assert.rejects(alice.getMemory(bobs.memory.id), /not found/i);
    const seen = (await alice.search({ query: "door code" })).results.map((result) => result.memory.content);
    assert.deepEqual(seen, ["Alice's door code is 1234"]);
    assert.equal((await office.search({ wholeTenant: true, query: "door code" })).results.length, 2);
    await stop(running, "SIGTERM");
    await assert.rejects(
      startService(args, { TACKLE_MEMORY_API_KEYS: "key-x=acme?sessionId=s1" }),
      /bound to userId and agentId, not "sessionId"/,
    );
  });

  it("refuses an API key file that other users can read", async () => {
    const keys = join(directory, "shared-keys");
    writeFileSync(keys, "some-key=tenant-a\n", { mode: 0o644 });
    chmodSync(keys, 0o644);
    const port = await freePort();
    await assert.rejects(
      startService(
        ["--store", join(directory, "refused.db"), "--listen", `127.0.0.1:${port}`, "--api-keys-file", keys],
        {},
      ),
      /readable by other users.*chmod 600/,
    );
  });
});

describe("memory service process: PostgreSQL", () => {
  it("PostgreSQL: data survives a restart of the process", async () => {
    database = await createTestDatabase("tackle_memory_process");
    const port = await freePort();
    const environment = {
      TACKLE_MEMORY_STORE: database.url,
      TACKLE_MEMORY_LISTEN: `127.0.0.1:${port}`,
      TACKLE_MEMORY_API_KEYS: "pg-key=tenant-pg",
    };
    const first = await startService([], environment);
    children.push(first);
    const memoryId = await exercise(first.url, "pg-key");
    await stop(first, "SIGKILL");
    const second = await startService([], environment);
    children.push(second);
    await verify(second.url, "pg-key", memoryId);
    await stop(second, "SIGTERM");
  });

  it("PostgreSQL: a process killed between a keyed write and its answer stored neither; the retry runs it once", async () => {
    const killed = await createTestDatabase("tackle_memory_killed");
    try {
      const port = await freePort();
      const environment = {
        TACKLE_MEMORY_STORE: killed.url,
        TACKLE_MEMORY_LISTEN: `127.0.0.1:${port}`,
        TACKLE_MEMORY_API_KEYS: "kill-key=tenant-kill",
      };
      const stalled = await startService([], { ...environment, TACKLE_MEMORY_TEST_STALL_BEFORE_COMMIT: "1" });
      children.push(stalled);
      const content = "Ada: Haha, totally.";
      const pool = new pg.Pool({ connectionString: killed.url, max: 1 });
      try {
        const count = async (table: string) =>
          Number((await pool.query(`SELECT COUNT(*) AS n FROM ${table}`)).rows[0].n);
        const request = killBetweenWriteAndAnswer(stalled, "kill-key", "turn-12", content);
        await stalled.stderrLine(/stalledBeforeCommit/, underLoadMs(10_000));
        assert.equal(await count("memory_memories"), 0, "the write is not visible before its commit");
        await request;
        assert.equal(await count("memory_memories"), 0, "the killed process's transaction was rolled back");
        assert.equal(await count("memory_idempotency_keys"), 0, "no key is held");
      } finally {
        await pool.end();
      }
      const restarted = await startService([], environment);
      children.push(restarted);
      await retryAfterKill(restarted.url, "kill-key", "turn-12", content);
      await stop(restarted, "SIGTERM");
    } finally {
      await killed.drop();
    }
  });
});

describe("memory service process: a shared file and configured models", () => {
  it("two processes on one SQLite file write concurrently and lose nothing", async () => {
    const store = join(directory, "shared", "memory.db");
    const environment = { TACKLE_MEMORY_API_KEYS: "shared-key=tenant-shared" };
    const [left, right] = await Promise.all(
      [await freePort(), await freePort()].map((port) =>
        startService(["--store", store, "--listen", `127.0.0.1:${port}`], environment),
      ),
    );
    children.push(left!, right!);
    const clients = [left!, right!].map(
      (running) =>
        new MemoryClient({ baseUrl: running.url, apiKey: "shared-key", allowPrivateNetwork: true }),
    );
    await Promise.all(
      Array.from({ length: 60 }, (_, index) =>
        clients[index % 2]!.writeEvent({
          sessionId: "shared",
          role: "user",
          content: `I noted item number ${index} today.`,
          customId: `item-${index % 40}`,
        }),
      ),
    );
    const events = await clients[0]!.recallConversation({ sessionId: "shared", limit: 200 });
    assert.equal(events.events.length, 40, "one event per custom id across both processes");
    // Each event's turn kept once as an episode, and the memory mined from it once.
    assert.equal((await clients[1]!.status()).counts.memories, 80, "each event's memories stored once");
    await Promise.all([stop(left!, "SIGTERM"), stop(right!, "SIGTERM")]);
  });

  it("takes AI SDK models from a module named in configuration", async () => {
    const port = await freePort();
    const running = await startService(
      ["--store", join(directory, "models.db"), "--listen", `127.0.0.1:${port}`],
      {
        TACKLE_MEMORY_API_KEYS: "m-key=tenant-m",
        TACKLE_MEMORY_MODELS: fileURLToPath(new URL("./fixtures/test-models.ts", import.meta.url)),
      },
    );
    children.push(running);
    const client = new MemoryClient({ baseUrl: running.url, apiKey: "m-key", allowPrivateNetwork: true });
    const status = await client.status();
    assert.equal(status.retrieval, "fused");
    assert.equal(status.embeddingModel, "tackle-test:hashing-test-embedder");
    await stop(running, "SIGTERM");
  });

  it("--embedder word-vectors ranks with the local word vectors: no module, no network", async () => {
    const port = await freePort();
    const running = await startService(
      [
        "--store",
        join(directory, "vectors.db"),
        "--listen",
        `127.0.0.1:${port}`,
        "--embedder",
        "word-vectors",
      ],
      { TACKLE_MEMORY_API_KEYS: "v-key=tenant-v" },
    );
    children.push(running);
    const client = new MemoryClient({ baseUrl: running.url, apiKey: "v-key", allowPrivateNetwork: true });
    const status = await client.status();
    assert.equal(status.retrieval, "fused");
    assert.equal(status.embeddingModel, "tackle:glove-100d-sif");
    await client.add({ userId: "u", content: "Jonas: How is the new gig going?" });
    await client.add({ userId: "u", content: "Jonas: I had ramen with Lena yesterday." });
    const found = await client.search({ userId: "u", query: "Where does Maya work?" });
    // No word is shared: BM25 alone finds nothing; the gig turn is the closest in meaning.
    const closest = found.results.toSorted((a, b) => (b.components.vector ?? 0) - (a.components.vector ?? 0));
    assert.match(closest[0]?.memory.content ?? "", /new gig/, JSON.stringify(found.results));
    await stop(running, "SIGTERM");
  });
});

describe("memory service process: usage and listen errors", () => {
  it("--help prints the usage; a malformed --listen or a taken port is named, not a stack or a wrong host", async () => {
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
        const child = spawn(process.execPath, ["--conditions=@tackle/source", main, ...args], {
          env: { PATH: process.env.PATH ?? "", TACKLE_MEMORY_API_KEYS: "k=t" },
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
          reject(new Error(`tackle-memory ${args.join(" ")} did not exit: ${stderr}`));
        }, underLoadMs(60_000));
        child.once("exit", (code) => {
          clearTimeout(timer);
          resolve({ code, stdout, stderr });
        });
      });
    const help = await run(["--help"]);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^usage: tackle-memory serve .*--listen host:port/m);
    assert.match(help.stdout, /--allow-remote/);

    const embedder = await run(["serve", "--store", join(directory, "embedder.db"), "--embedder", "bert"]);
    assert.equal(embedder.code, 2);
    assert.match(embedder.stderr, /--embedder \/ TACKLE_MEMORY_EMBEDDER takes word-vectors, got "bert"/);

    const bare = await run(["serve", "--store", join(directory, "listen.db"), "--listen", "4384"]);
    assert.equal(bare.code, 2);
    assert.match(
      bare.stderr,
      /--listen \/ TACKLE_MEMORY_LISTEN takes host:port \(e\.g\. 127\.0\.0\.1:4280\), got "4384"/,
    );

    const first = await startService(
      ["--store", join(directory, "taken.db"), "--listen", `127.0.0.1:${await freePort()}`],
      {
        TACKLE_MEMORY_API_KEYS: "k=t",
      },
    );
    try {
      const second = await run([
        "serve",
        "--store",
        join(directory, "taken-2.db"),
        "--listen",
        new URL(first.url).host,
      ]);
      assert.equal(second.code, 1);
      assert.match(second.stderr, /Cannot listen on 127\.0\.0\.1:\d+: the port is in use/);
      assert.doesNotMatch(second.stderr, /EADDRINUSE/);
    } finally {
      await stop(first, "SIGTERM");
    }
  });
});

describe("memory service process: refusing to start", () => {
  it("a PostgreSQL database that does not exist is named, with what to do", async () => {
    const missing = new URL(testPostgresUrl());
    missing.pathname = "/tackle_memory_no_such_database";
    const child = spawn(
      process.execPath,
      ["--conditions=@tackle/source", main, "serve", "--listen", "127.0.0.1:0"],
      {
        env: {
          PATH: process.env.PATH ?? "",
          TACKLE_MEMORY_API_KEYS: "k=t",
          TACKLE_MEMORY_STORE: missing.href,
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stderr = "";
    child.stderr.on("data", (chunk) => {
      stderr += String(chunk);
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    assert.equal(code, 1);
    assert.match(
      stderr,
      /^tackle-memory: Cannot open the memory store postgres:\/\/\S+\/tackle_memory_no_such_database \(PostgreSQL\): database "tackle_memory_no_such_database" does not exist \(the service creates its tables, not the database: createdb it first\)$/m,
    );
  });

  it("PostgreSQL down: one line naming the store (without its password), exit 1, nothing listening", async () => {
    const port = await freePort();
    const child = spawn(
      process.execPath,
      ["--conditions=@tackle/source", main, "serve", "--listen", "127.0.0.1:0"],
      {
        env: {
          PATH: process.env.PATH ?? "",
          TACKLE_MEMORY_API_KEYS: "k=t",
          TACKLE_MEMORY_STORE: `postgres://app:pg-secret@127.0.0.1:${port}/memory`,
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += String(chunk);
    });
    child.stderr.on("data", (chunk) => {
      stderr += String(chunk);
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    assert.equal(code, 1);
    assert.equal(stdout, "", "never a listening line");
    // Before: "tackle-memory: connect ECONNREFUSED 127.0.0.1:…", which named neither PostgreSQL nor the store.
    assert.equal(
      stderr,
      `tackle-memory: Cannot open the memory store postgres://app:***@127.0.0.1:${port}/memory (PostgreSQL): connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
  });

  it("refuses to listen beyond loopback unless allowed", async () => {
    const child = spawn(
      process.execPath,
      [
        "--conditions=@tackle/source",
        main,
        "serve",
        "--store",
        join(directory, "x.db"),
        "--listen",
        "0.0.0.0:0",
      ],
      {
        env: { PATH: process.env.PATH ?? "", TACKLE_MEMORY_API_KEYS: "k=t" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stderr = "";
    child.stderr.on("data", (chunk) => {
      stderr += String(chunk);
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    assert.equal(code, 1);
    assert.match(stderr, /allowRemote|allow-remote/);
  });
});
