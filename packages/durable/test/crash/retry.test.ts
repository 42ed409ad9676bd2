/**
 * Retries survive a crash: a tool calling a real HTTP service that answers 503 twice, then 200. The
 * first process is SIGKILLed while it waits between try 1 and try 2; a fresh process resumes the run,
 * tries twice more and completes. Every try is journaled with its error, under one idempotency key.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

const child = fileURLToPath(new URL("./retry-child.ts", import.meta.url));

function journal(
  databasePath: string,
): { key: string; state: string; attempt: number; value: string | null }[] {
  if (!existsSync(databasePath)) return [];
  const database = new DatabaseSync(databasePath, { readOnly: true });
  try {
    return database
      .prepare("SELECT key, state, attempt, value FROM durable_journal ORDER BY key")
      .all() as unknown as { key: string; state: string; attempt: number; value: string | null }[];
  } catch {
    return [];
  } finally {
    database.close();
  }
}

test("503 twice, then success on try 3, with a SIGKILL between try 1 and try 2", async () => {
  const directory = mkdtempSync(join(tmpdir(), "durable-retry-"));
  const databasePath = join(directory, "runs.sqlite");
  const effectsPath = join(directory, "effects.jsonl");
  let requests = 0;
  const service = createServer((_request, response) => {
    requests++;
    if (requests <= 2) {
      response.writeHead(503).end("busy");
      return;
    }
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ rate: 1.08 }));
  });
  await new Promise<void>((resolve) => service.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(service.address() as AddressInfo).port}/rates`;
  try {
    // The first process waits a minute between tries: it is killed in that wait.
    const first = spawn(
      process.execPath,
      ["--conditions=@tackle/source", child, databasePath, effectsPath, "t", url, "60000", "start"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    first.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    first.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => first.on("exit", (code) => resolve(code)));
    const deadline = Date.now() + 30_000;
    while (!journal(databasePath).some((record) => record.key.endsWith("@1"))) {
      assert.ok(Date.now() < deadline, `try 1 was never journaled: ${output}`);
      await sleep(25);
    }
    assert.ok(first.kill("SIGKILL"));
    assert.equal(await exited, null, "killed, not exited");
    assert.equal(requests, 1);

    const second = spawn(
      process.execPath,
      ["--conditions=@tackle/source", child, databasePath, effectsPath, "t", url, "10", "resume"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let resumed = "";
    second.stdout.on("data", (chunk: Buffer) => {
      resumed += chunk.toString();
    });
    second.stderr.on("data", (chunk: Buffer) => {
      resumed += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => second.on("exit", (exit) => resolve(exit)));
    assert.equal(code, 0, resumed);
    assert.match(resumed, /completed \{"rate":1\.08\}/);
    assert.equal(requests, 3);

    const tries = readFileSync(effectsPath, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { key: string; attempt: number });
    assert.deepEqual(
      tries.map((entry) => entry.attempt),
      [1, 2, 3],
    );
    assert.equal(new Set(tries.map((entry) => entry.key)).size, 1, "one idempotency key for every try");

    const records = journal(databasePath);
    const step = records.find((record) => !record.key.includes("@") && !record.key.startsWith("answer:"));
    assert.deepEqual([step?.state, step?.attempt], ["done", 3]);
    const failedTries = records.filter((record) => record.key.includes("@"));
    assert.deepEqual(
      failedTries.map((record) => [record.key.split("@")[1], record.state, record.attempt]),
      [
        ["1", "failed", 1],
        ["2", "failed", 2],
      ],
    );
    for (const record of failedTries) assert.match(record.value ?? "", /answered 503/);
  } finally {
    service.close();
    rmSync(directory, { recursive: true, force: true });
  }
});
