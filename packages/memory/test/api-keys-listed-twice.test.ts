/**
 * A key listed twice in TACKLE_MEMORY_API_KEYS (or its file) is refused, never the last entry kept: a
 * key bound to one identity could otherwise be rebound to another — or to the whole tenant — by a
 * line added below it. `parseApiKeys` throws `ApiKeysConfigError` naming the entries by position;
 * `tackle-memory serve` exits 2 with that one line, and neither ever prints the key.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { ApiKeysConfigError, parseApiKeys } from "@tackle/memory/server";
import { freePort } from "@tackle/test-support";
import { serveToExit } from "./support/service-process.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-keys-twice-"));
after(() => rmSync(directory, { recursive: true, force: true }));

const secret = "s3cret-key-of-alice";

it("parseApiKeys refuses a key listed again, whatever it grants, naming both entries and not the key", () => {
  const lists = [
    // Rebinding alice's key to bob, to the whole tenant, to another tenant; the same grant again.
    `${secret}=acme?userId=alice\nother=acme, ${secret}=acme?userId=bob`,
    `${secret}=acme?userId=alice\n# a comment, with commas\nother=acme\n${secret}=acme`,
    `${secret}=acme?userId=alice,other=acme,${secret}=evil`,
    `${secret}=acme\n${secret}=acme`,
  ];
  const positions = [
    { entry: 3, line: 2, firstEntry: 1 },
    { entry: 3, line: 4, firstEntry: 1 },
    { entry: 3, line: 1, firstEntry: 1 },
    { entry: 2, line: 2, firstEntry: 1 },
  ];
  for (const [index, text] of lists.entries()) {
    assert.throws(
      () => parseApiKeys(text),
      (error: unknown) => {
        assert.ok(error instanceof ApiKeysConfigError, String(error));
        const { entry, line, firstEntry } = error;
        assert.deepEqual({ entry, line, firstEntry }, positions[index]);
        assert.match(
          error.message,
          new RegExp(`^API key entry ${entry} \\(line ${line}\\) lists the key of entry 1 again`),
        );
        assert.ok(!error.message.includes(secret), error.message);
        return true;
      },
      text,
    );
  }
  // Keys differing only by the spaces around them are one key: entries are trimmed.
  assert.throws(() => parseApiKeys(`${secret}=a ,  ${secret}=b`), ApiKeysConfigError);
  // Two keys, each once, stay as before.
  assert.deepEqual(parseApiKeys(`${secret}=acme?userId=alice,other=acme`), {
    [secret]: { tenant: "acme", userId: "alice" },
    other: "acme",
  });
});

/** Runs `serve` to its exit, within a deadline (a start that comes up is killed and answers `started`). */
const serve = (environment: Record<string, string>) => serveToExit([], environment);

it("tackle-memory serve exits 2 on a key listed twice, in one line naming its place, never the key", async () => {
  const port = await freePort();
  const base = {
    TACKLE_MEMORY_STORE: join(directory, "memory.db"),
    TACKLE_MEMORY_LISTEN: `127.0.0.1:${port}`,
  };
  const inline = await serve({
    ...base,
    TACKLE_MEMORY_API_KEYS: `${secret}=acme?userId=alice,other=acme\n${secret}=acme`,
  });
  assert.equal(inline.code, 2, inline.stderr);
  assert.equal(
    inline.stderr,
    "tackle-memory: TACKLE_MEMORY_API_KEYS: API key entry 3 (line 2) lists the key of entry 1 again: each key may be listed once\n",
  );
  assert.ok(!(inline.stderr + inline.stdout).includes(secret));

  const file = join(directory, "keys");
  writeFileSync(file, `# keys\n${secret}=acme?userId=alice\n${secret}=acme?userId=bob\n`, { mode: 0o600 });
  const fromFile = await serve({ ...base, TACKLE_MEMORY_API_KEYS_FILE: file });
  assert.equal(fromFile.code, 2, fromFile.stderr);
  assert.equal(
    fromFile.stderr,
    `tackle-memory: ${file}: API key entry 2 (line 3) lists the key of entry 1 again: each key may be listed once\n`,
  );
  assert.ok(!(fromFile.stderr + fromFile.stdout).includes(secret));

  // The same list without the repeat starts.
  const once = await serve({ ...base, TACKLE_MEMORY_API_KEYS: `${secret}=acme?userId=alice,other=acme` });
  assert.equal(once.code, "started", once.stderr);
});
