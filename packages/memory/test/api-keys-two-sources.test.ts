/**
 * `tackle-memory serve` given API keys two ways at once — TACKLE_MEMORY_API_KEYS and a key file, by
 * `--api-keys-file` or TACKLE_MEMORY_API_KEYS_FILE — refuses to start (ADR 0556): it used to take the
 * variable's keys and drop the file's without a word, so a key the file bound to one user, or a key
 * the operator added to it, was silently not the key in force. One line, exit 2, no key printed,
 * nothing opened; either way alone starts, and its keys are the ones that work.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { freePort } from "@tackle/test-support";
import { killAllStarted, type Running, serveToExit, startService, stop } from "./support/service-process.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-keys-two-"));
const children: Running[] = [];
after(async () => {
  for (const running of children) await stop(running, "SIGKILL");
  killAllStarted();
  rmSync(directory, { recursive: true, force: true });
});

const inlineSecret = "inline-secret-key";
const fileSecret = "file-secret-key";

const serve = serveToExit;

const keyFile = () => {
  const file = join(directory, "keys");
  writeFileSync(file, `# Alice's app\n${fileSecret}=acme?userId=alice\n`, { mode: 0o600 });
  return file;
};

it("refuses keys given both inline and by a key file: one line naming both, exit 2, no store opened", async () => {
  const file = keyFile();
  const store = join(directory, "refused", "memory.db");
  const base = { TACKLE_MEMORY_STORE: store, TACKLE_MEMORY_API_KEYS: `${inlineSecret}=acme` };
  const cases: [string[], Record<string, string>, string][] = [
    [["--api-keys-file", file], {}, "--api-keys-file"],
    [[], { TACKLE_MEMORY_API_KEYS_FILE: file }, "TACKLE_MEMORY_API_KEYS_FILE"],
  ];
  for (const [args, environment, source] of cases) {
    const outcome = await serve([...args, "--listen", "127.0.0.1:0"], { ...base, ...environment });
    assert.equal(outcome.code, 2, `${source}: ${outcome.stderr}`);
    assert.equal(
      outcome.stderr,
      `tackle-memory: TACKLE_MEMORY_API_KEYS and ${source} both give the API keys: give them one way, not both\n`,
    );
    const printed = outcome.stderr + outcome.stdout;
    assert.ok(!printed.includes(inlineSecret) && !printed.includes(fileSecret), printed);
    assert.equal(existsSync(store), false, `${source}: no store was opened`);
  }
});

it("either way alone starts, and its keys are the ones in force", async () => {
  const file = keyFile();
  const status = (url: string, key: string) =>
    fetch(`${url}/v1/status`, { headers: { authorization: `Bearer ${key}` } }).then(
      (response) => response.status,
    );
  const args = (name: string) => ["--store", join(directory, `${name}.db`)];

  const fromFile = await startService([...args("file"), "--listen", `127.0.0.1:${await freePort()}`], {
    TACKLE_MEMORY_API_KEYS_FILE: file,
  });
  children.push(fromFile);
  assert.equal(await status(fromFile.url, fileSecret), 200);
  assert.equal(await status(fromFile.url, inlineSecret), 401);
  assert.equal(await stop(fromFile, "SIGTERM"), 0);

  const inline = await startService([...args("inline"), "--listen", `127.0.0.1:${await freePort()}`], {
    TACKLE_MEMORY_API_KEYS: `${inlineSecret}=acme`,
    // An empty variable counts as unset, as for every other setting.
    TACKLE_MEMORY_API_KEYS_FILE: "",
  });
  children.push(inline);
  assert.equal(await status(inline.url, inlineSecret), 200);
  assert.equal(await status(inline.url, fileSecret), 401);
  assert.equal(await stop(inline, "SIGTERM"), 0);
});
