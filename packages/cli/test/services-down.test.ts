/**
 * A newcomer's walk with the services behind the built-in modules down or misnamed: each command exits
 * non-zero with one line naming the outage (which store, which URL, which variable), never an empty
 * list or "unknown tool", and never with a password in it.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { createPostgresDocumentStore } from "@tackle/docscript/postgres";
import { serveMemory } from "@tackle/memory/server";
import { createTestDatabase, freePort, startNatsServer } from "@tackle/test-support";
import { cleanEnv, runTackle } from "./tackle-process.ts";

const workDirectory = mkdtempSync(join(tmpdir(), "tackle-services-down-"));
after(() => rmSync(workDirectory, { recursive: true, force: true }));

/** stderr without the JSON log lines: what a person reads as the command's own answer. */
function answer(stderr: string): string {
  return stderr
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.startsWith("{"))
    .join("\n");
}

test("tackle serve with the broker down exits 1 naming the broker and its variable", async () => {
  const port = await freePort();
  const refused = await runTackle(["serve"], {
    env: cleanEnv({
      MESH_BROKER_URL: `nats://alice:s3cret-pass@127.0.0.1:${port}`,
      MESH_NODE: "n1",
      MESH_CONSOLE_LISTEN: "127.0.0.1:0",
    }),
  });
  assert.equal(refused.code, 1, refused.stderr);
  assert.match(
    answer(refused.stderr),
    new RegExp(`^tackle: Cannot reach nats://\\*\\*\\*@127\\.0\\.0\\.1:${port} \\(MESH_BROKER_URL\\)`),
  );
  assert.ok(!refused.stderr.includes("s3cret-pass"));
  assert.equal(refused.stdout, "");
});

test("the memory module's PostgreSQL down: tools lists it failed naming the store, call says it failed to load", async () => {
  const port = await freePort();
  const env = cleanEnv({ TACKLE_MEMORY_STORE: `postgres://app:pg-secret@127.0.0.1:${port}/memory` });
  const store = new RegExp(
    `Cannot open the memory store postgres://app:\\*\\*\\*@127\\.0\\.0\\.1:${port}/memory \\(PostgreSQL\\): connect ECONNREFUSED`,
  );
  const tools = await runTackle(["tools"], { env });
  assert.equal(tools.code, 1, tools.stderr);
  assert.match(tools.stdout, /^memory\s+failed/m);
  assert.match(tools.stdout, store);
  assert.match(answer(tools.stderr), /^tackle: 1 module not ok: memory \(failed\)/);
  const call = await runTackle(["call", "memory.memory_status", "{}"], { env });
  assert.equal(call.code, 1, call.stderr);
  assert.equal(call.stdout, "");
  // Before: `error unknown_tool: Unknown tool "memory.memory_status". Available: (none)`.
  assert.match(answer(call.stderr), /^error unavailable: Module "memory" failed to load/);
  assert.match(answer(call.stderr), store);
  for (const output of [tools.stdout, tools.stderr, call.stderr]) assert.ok(!output.includes("pg-secret"));
});

test("DOCSCRIPT_DATABASE as a postgres:// URL opens PostgreSQL (not a SQLite file named after it); down, it is named", async () => {
  const port = await freePort();
  const down = await runTackle(["call", "docscript.changes", "{}"], {
    env: cleanEnv({ DOCSCRIPT_DATABASE: `postgres://app:pg-secret@127.0.0.1:${port}/documents` }),
    cwd: workDirectory,
  });
  assert.equal(down.code, 1, down.stderr);
  assert.match(
    answer(down.stderr),
    new RegExp(
      `^error unavailable: Module "docscript" failed to load.*DOCSCRIPT_DATABASE postgres://app:\\*\\*\\*@127\\.0\\.0\\.1:${port}/documents: cannot open the PostgreSQL document store: connect ECONNREFUSED`,
    ),
  );
  assert.ok(!down.stderr.includes("pg-secret"));
  const database = await createTestDatabase("tackle_cli_docs");
  try {
    const up = await runTackle(["call", "docscript.changes", "{}"], {
      env: cleanEnv({ DOCSCRIPT_DATABASE: database.url }),
      cwd: workDirectory,
    });
    assert.equal(up.code, 0, up.stderr);
    assert.equal(JSON.parse(up.stdout).doc_id, "sample-timeline");
    const store = await createPostgresDocumentStore({ connectionString: database.url });
    try {
      assert.ok((await store.tokenHash("sample-timeline")) !== undefined, "the sample is in PostgreSQL");
    } finally {
      await store.close();
    }
  } finally {
    await database.drop();
  }
  // Before, a file "postgres:/127.0.0.1:…" appeared in the working directory and nothing said so.
  assert.deepEqual(readdirSync(workDirectory), []);
});

test("TACKLE_MEMORY_URL: a service on loopback is reached; one that is down is named in the call's error", async () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-url-"));
  const service = await serveMemory({
    store: join(directory, "memory.db"),
    apiKeys: { "key-1": "t" },
    port: 0,
  });
  try {
    const up = await runTackle(["call", "memory.memory_status", "{}"], {
      env: cleanEnv({ TACKLE_MEMORY_URL: service.url, TACKLE_MEMORY_API_KEY: "key-1" }),
    });
    // Before: the module failed to load ("Set allowPrivateNetwork to reach it"), with no way to set it.
    assert.equal(up.code, 0, up.stderr);
    assert.equal(JSON.parse(up.stdout).tenant, "t");
  } finally {
    await service.close();
    rmSync(directory, { recursive: true, force: true });
  }
  const port = await freePort();
  const down = await runTackle(["call", "memory.memory_status", "{}"], {
    env: cleanEnv({ TACKLE_MEMORY_URL: `http://127.0.0.1:${port}`, TACKLE_MEMORY_API_KEY: "key-1" }),
  });
  assert.equal(down.code, 1, down.stderr);
  assert.equal(down.stdout, "");
  assert.match(
    answer(down.stderr),
    new RegExp(`^error network_error: Could not reach the memory service at http://127\\.0\\.0\\.1:${port}`),
  );
});

test("a broker without JetStream: tools, call, serve and mesh say so in one line, with how to start it", async () => {
  const nats = await startNatsServer({ extraArgs: ["-js=false"] });
  try {
    for (const args of [
      ["mesh", "ls"],
      ["mesh", "issue", "n1", "demo"],
      // It listed "No modules." and exited 0; serve said "Cannot reach" a broker it had reached.
      ["tools"],
      ["call", "demo.echo", "{}"],
      ["serve"],
    ]) {
      const refused = await runTackle(args, {
        env: cleanEnv({ MESH_BROKER_URL: nats.url, MESH_NODE: "n1", MESH_CONSOLE_LISTEN: "127.0.0.1:0" }),
      });
      assert.equal(refused.code, 1, refused.stderr);
      assert.equal(refused.stdout, "");
      assert.equal(
        answer(refused.stderr),
        `tackle: The broker at ${nats.url} has no JetStream, where the mesh keeps its memberships and catalogue: start nats-server with -js (--jetstream)`,
      );
      assert.doesNotMatch(refused.stderr, /unexpected failure|at async/);
    }
  } finally {
    await nats.close();
  }
});

test("a record the mesh refuses is one line and exit 2, naming both parties, never an unexpected failure", async () => {
  const nats = await startNatsServer();
  try {
    const env = cleanEnv({ MESH_BROKER_URL: nats.url });
    const issued = await runTackle(
      ["mesh", "issue", "n1", "notes", "--prefix", "acme.notes", "--seat", "pad"],
      {
        env,
      },
    );
    assert.equal(issued.code, 0, issued.stderr);
    for (const [args, refusal] of [
      // Another module's seat, on a subject of its own (ADR 0224).
      [
        ["mesh", "issue", "n2", "editor", "--seat", "pad=acme.editor-pad"],
        "tackle: membership: seat pad of module editor is already held by module notes (node n1's membership)",
      ],
      // A prefix under another module's (ADR 0219).
      [
        ["mesh", "issue", "n2", "squat", "--prefix", "acme.notes.x"],
        "tackle: membership: prefix acme.notes.x",
      ],
    ] as const) {
      const refused = await runTackle([...args], { env });
      assert.equal(refused.code, 2, refused.stderr);
      assert.equal(refused.stdout, "");
      assert.ok(answer(refused.stderr).startsWith(refusal), refused.stderr);
      assert.doesNotMatch(refused.stderr, /unexpected failure|at async/);
    }
  } finally {
    await nats.close();
  }
});
