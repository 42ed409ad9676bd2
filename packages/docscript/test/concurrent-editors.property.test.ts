/**
 * Concurrent editors, as a property against a serial oracle: per store (a SQLite file, a PostgreSQL
 * database), two document server processes over that one store, and four editors at once, each a real
 * document client over HTTP sending every script through either server. Each editor runs random
 * scripts on what it last pulled (a session over a fork, pushed as one plan): read-modify-writes of
 * shared counters (a track's volume bumped) and lists (a transcript's segments appended to), adds and
 * removes of entities and of relations, renames, scripts that read one entity and write another (one
 * track's volume copied to another), scripts that throw half way, pushes aborted in flight (sent again
 * at times, as a client that got no answer does; else asked of the other server at once, and when it
 * says `unknown`, run again there under the plan's id, as the tool does after `not_found`: ADR 0568),
 * and a conflicted script run again on a fresh pull.
 *
 * The oracle, after each round: every client call answered before its deadline; each script ended one
 * way (committed, conflicted, thrown, aborted); the change log stores each plan at most once, every one
 * answered committed, none answered conflicted or thrown, an aborted one as every server's plan state
 * says, a script and its run again under the same id not both stored; the committed scripts replayed serially in the log's order on a plain model
 * (`concurrent-editors-model.ts`) never read stale a field they write (a concurrent commit to it must
 * have made them `conflicted`, ADR 0475), a link never lands on an entity deleted before it; and the
 * document a fresh client reads through each server equals the model, with no issues.
 *
 * The lost-update rule compares writes, not reads (ADR 0475): a committed script may have read a field
 * it does not write (the track it copies from) that a commit before it changed. The replay gives such
 * reads what the script read, as it ran, and counts them (`staleReadsOfUnwritten`).
 *
 * `TACKLE_PROPERTY_ROUNDS` rounds a store (default 3), from seed `TACKLE_PROPERTY_SEED` (default 1);
 * a failure names its seed and round.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { createTestDatabase, type TestDatabase, underLoadMs } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { createDocumentClient, interpretDocument, timelineSchema } from "../src/index.ts";
import { modelOf } from "./concurrent-editors-model.ts";
import { checkRound, newTally, type Round, runEditor, seedSnapshot } from "./concurrent-editors-support.ts";

const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 3);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 1);
const editors = 4;
const scriptsPerEditor = 6;
const adminToken = "admin-token-concurrent-0123456789";
const child = fileURLToPath(new URL("./concurrent-editors-server.ts", import.meta.url));

/** What the servers wrote on stderr (their failures), printed with a failing round. */
const serverLog: string[] = [];

/** A document server process over `where`; its url once it listens. */
async function startServer(kind: "sqlite" | "postgres", where: string, children: ChildProcess[]) {
  const server = spawn(process.execPath, ["--conditions=@tackle/source", child, kind, where, adminToken], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(server);
  let stderr = "";
  server.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
    serverLog.push(chunk.toString());
  });
  const lines = createInterface({ input: server.stdout as NodeJS.ReadableStream });
  return await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server not ready: ${stderr}`)), underLoadMs(60_000));
    lines.on("line", (line) => {
      const match = /^ready (\S+)$/.exec(line);
      if (match === null) return;
      clearTimeout(timer);
      resolve(match[1] as string);
    });
    server.once("exit", (code) => reject(new Error(`server exited (${code}): ${stderr}`)));
  });
}

function concurrentEditorsSuite(
  name: string,
  kind: "sqlite" | "postgres",
  open: () => Promise<{ where: string; cleanup: () => Promise<void> }>,
) {
  describe(`concurrent editors through two document servers on ${name}`, () => {
    const children: ChildProcess[] = [];
    let origins: string[] = [];
    let cleanup = async () => {};
    const tally = newTally();
    before(async () => {
      const store = await open();
      cleanup = store.cleanup;
      // One first, so the other opens a store already migrated.
      origins = [await startServer(kind, store.where, children)];
      origins.push(await startServer(kind, store.where, children));
    });
    after(async () => {
      for (const server of children)
        if (server.exitCode === null && server.signalCode === null) {
          const exited = new Promise((resolve) => server.once("exit", resolve));
          server.kill("SIGTERM");
          await exited;
        }
      await cleanup();
    });
    for (let index = 0; index < rounds; index++) {
      const roundSeed = seed * 1_000 + index;
      it(`round ${index} (seed ${roundSeed}): the document is the committed scripts in commit order`, async () => {
        const documentId = `doc-${roundSeed}`;
        const token = `token-${roundSeed}-0123456789abcdef`;
        const snapshot = seedSnapshot();
        const admin = createDocumentClient({ origin: origins[0] as string, token });
        assert.equal(await admin.createDocument(documentId, { adminToken, token, snapshot }), true);
        const round: Round = { origins, documentId, token, seed: roundSeed, attempts: [], faults: [], tally };
        const seedModel = modelOf(interpretDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema));
        const { issues: _, ...model } = seedModel;
        const logged = serverLog.length;
        try {
          await Promise.all(
            Array.from({ length: editors }, (_, editor) => runEditor(round, editor, scriptsPerEditor)),
          );
          await checkRound(round, model);
        } catch (error) {
          round.faults.push(String((error as Error).stack));
        }
        assert.deepEqual(
          round.faults,
          [],
          `seed ${roundSeed} (TACKLE_PROPERTY_SEED=${seed}, round ${index}); the servers logged: ${serverLog.slice(logged).join("")}`,
        );
      });
    }
    it("the rounds met every outcome", (context) => {
      context.diagnostic(`${name}: ${JSON.stringify(tally)}`);
      console.log(`concurrent editors on ${name} (seed ${seed}): ${JSON.stringify(tally)}`);
      if (rounds >= 3)
        assert.ok(
          tally.committed > 0 && tally.conflicted > 0 && tally.thrown > 0 && tally.aborted > 0,
          JSON.stringify(tally),
        );
    });
  });
}

concurrentEditorsSuite("a SQLite file", "sqlite", async () => {
  const directory = await mkdtemp(join(tmpdir(), "docscript-concurrent-editors-"));
  return {
    where: join(directory, "documents.sqlite"),
    cleanup: () => rm(directory, { recursive: true, force: true }),
  };
});

concurrentEditorsSuite("PostgreSQL", "postgres", async () => {
  const database: TestDatabase = await createTestDatabase("docscript_concurrent_editors");
  return { where: database.url, cleanup: () => database.drop() };
});
