/**
 * Another user of the machine is on the wrong side of `$TACKLE_HOME`: it holds the console token, the
 * memories and the console's runs. A home Tackle creates is 0700 with its stores 0600 (they were 0755
 * and 0644, readable by everyone); a home left open by an earlier version is named with the fix.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { freePort } from "@tackle/test-support";
import { cleanEnv, runTackle, startServe } from "./tackle-process.ts";

const parent = mkdtempSync(join(tmpdir(), "tackle-home-privacy-"));
after(() => rmSync(parent, { recursive: true, force: true }));
const mode = (path: string) => statSync(path).mode & 0o777;

test("a home Tackle creates is 0700 and every store in it 0600", async () => {
  const home = join(parent, "fresh");
  const listed = await runTackle(["tools"], { env: cleanEnv({ TACKLE_HOME: home }) });
  assert.equal(listed.code, 0, listed.stderr);
  assert.equal(mode(home), 0o700);
  const files = readdirSync(home);
  assert.ok(files.includes("memory.db"), files.join(", "));
  for (const file of files) assert.equal(mode(join(home, file)), 0o600, file);
});

test("serve names a home open to other users, with the command that closes it", async () => {
  const home = join(parent, "open");
  mkdirSync(home);
  chmodSync(home, 0o755);
  const serve = await startServe(
    [],
    cleanEnv({
      TACKLE_HOME: home,
      MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}`,
      TACKLE_LOG_LEVEL: "warn",
    }),
  );
  try {
    assert.match(
      serve.stderr(),
      new RegExp(`${home.replaceAll("/", "\\/")} is open to other users \\(mode 755\\).*run: chmod 700 `),
    );
    // The stores it made there are still its owner's alone.
    for (const file of readdirSync(home)) assert.equal(mode(join(home, file)), 0o600, file);
  } finally {
    await serve.stop();
  }
});
