import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { CliError } from "../program/cli-error.ts";
import { bearerMatches, ensureConsoleToken, readConsoleToken } from "./console-token.ts";

test("the token file is created once, 0600, and read back unchanged", (context) => {
  const home = mkdtempSync(join(tmpdir(), "tackle-token-"));
  context.after(() => rmSync(home, { recursive: true, force: true }));
  const path = join(home, "nested", "console-token");
  const first = ensureConsoleToken(path);
  assert.equal(first.created, true);
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.ok(first.token.length >= 40);
  const second = ensureConsoleToken(path);
  assert.equal(second.created, false);
  assert.equal(second.token, first.token);
});

test("a token file other users can read is refused with the chmod that fixes it", (context) => {
  const home = mkdtempSync(join(tmpdir(), "tackle-token-"));
  context.after(() => rmSync(home, { recursive: true, force: true }));
  const path = join(home, "console-token");
  writeFileSync(path, "secret\n");
  chmodSync(path, 0o644);
  assert.throws(
    () => readConsoleToken(path),
    (error: unknown) => CliError.isInstance(error) && error.message.includes(`chmod 600 ${path}`),
  );
});

test("a token file that holds no usable token (damaged, two words) is refused, naming the file", (context) => {
  const home = mkdtempSync(join(tmpdir(), "tackle-token-"));
  context.after(() => rmSync(home, { recursive: true, force: true }));
  const path = join(home, "console-token");
  for (const damaged of ["two words\n", "garbage\u0000\u0001bytes", "é-not-ascii"]) {
    writeFileSync(path, damaged, { mode: 0o600 });
    assert.throws(
      () => ensureConsoleToken(path),
      (error: unknown) =>
        CliError.isInstance(error) &&
        error.message ===
          `The console token file ${path} does not hold a token (one word of letters, digits and -._~+/); delete it and restart the console`,
    );
  }
  writeFileSync(path, "abc-DEF_123.~+/==\n", { mode: 0o600 });
  assert.equal(readConsoleToken(path), "abc-DEF_123.~+/==");
});

test("only the exact bearer token matches", () => {
  assert.equal(bearerMatches("Bearer abc", "abc"), true);
  assert.equal(bearerMatches("bearer abc", "abc"), true);
  assert.equal(bearerMatches("Bearer abd", "abc"), false);
  assert.equal(bearerMatches("Bearer ab", "abc"), false);
  assert.equal(bearerMatches("abc", "abc"), false);
  assert.equal(bearerMatches(undefined, "abc"), false);
});
