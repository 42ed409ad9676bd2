/**
 * A restart of a stdio child killed by a signal from outside (an OOM kill, an operator's) before its
 * MCP handshake (ADR 0227), with real child processes (`fixtures/chaos-child.mjs`): a bundle that has
 * finished a handshake starts again after the backoff, a few times in a row at most; a start that
 * exits on its own, a first start killed, or one killed too many times in a row is failed for good.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { ToolError } from "@tackle/core";
import { underLoadMs } from "@tackle/test-support";
import { bundleKind } from "../src/bundles/bundle-kind.ts";
import { StdioChild } from "../src/bundles/stdio-child.ts";
import { fixture, recordingLogger } from "./helpers.ts";
import { isRunning, readPids } from "./stdio-children-support.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-restart-handshake-"));
after(() => rmSync(directory, { recursive: true, force: true }));

function chaosChild(state: string, logger = recordingLogger()): StdioChild {
  const launch = bundleKind(fixture("chaos-child.mjs"));
  assert.equal(launch.kind, "launch");
  return new StdioChild({
    command: launch.kind === "launch" ? launch.command : "",
    args: launch.kind === "launch" ? launch.args : [],
    env: { MESH_OPERATOR_HOME: state },
    source: fixture("chaos-child.mjs"),
    logger,
    restartBackoff: { initialMs: 10, maxMs: 50 },
    handshakeTimeoutMs: underLoadMs(10_000),
  });
}

/** SIGKILLs a running child and waits until its exit has been reaped. */
async function killRunning(pid: number): Promise<void> {
  process.kill(pid, "SIGKILL");
  while (isRunning(pid)) await sleep(5);
  await sleep(20);
}

async function echo(child: StdioChild, tag: string): Promise<number> {
  const output = (await child.call("act", { tag, do: "echo" }, AbortSignal.timeout(underLoadMs(15_000)))) as {
    tag: string;
    pid: number;
  };
  assert.equal(output.tag, tag);
  return output.pid;
}

/** Rejects with the call's error; the call must fail. */
async function failing(child: StdioChild, tag: string): Promise<ToolError> {
  try {
    await echo(child, tag);
  } catch (error) {
    assert.ok(ToolError.isInstance(error), String(error));
    return error;
  }
  assert.fail(`${tag} answered`);
}

/**
 * Makes the child's next start hang in its handshake, sends a call (which starts it), SIGKILLs that
 * start once it is running, and returns the call's error.
 */
async function killNextStart(child: StdioChild, state: string, tag: string): Promise<ToolError> {
  const flag = join(state, "hang-start");
  writeFileSync(flag, "");
  const call = failing(child, tag);
  // The child appends its pid before it takes the flag away: once the flag is gone, the last pid hangs.
  const deadline = Date.now() + underLoadMs(10_000);
  while (existsSync(flag)) {
    assert.ok(Date.now() < deadline, "no start took the hang flag");
    await sleep(5);
  }
  const hung = readPids(state).at(-1);
  assert.ok(hung !== undefined && isRunning(hung));
  process.kill(hung, "SIGKILL");
  return await call;
}

describe("stdio child: a restart killed before its handshake", () => {
  it("starts a child again after its restart is killed in the handshake, and serves later calls", async () => {
    const state = mkdtempSync(join(directory, "restart-"));
    const logger = recordingLogger();
    const child = chaosChild(state, logger);
    try {
      await child.listTools();
      const first = await echo(child, "first");
      await killRunning(first);
      const error = await killNextStart(child, state, "during-restart");
      assert.equal(error.code, "child_exited", error.message);
      assert.equal(error.retryable, true);
      assert.match(error.message, /exited \(signal SIGKILL\) before its MCP handshake/);
      const third = await echo(child, "after");
      assert.equal(third, readPids(state).at(-1), "served by the child started last");
      assert.equal(readPids(state).length, 3);
      assert.ok(logger.lines.some((line) => line.level === "warn" && line.fields.killedStarts === 1));
      assert.ok(!logger.lines.some((line) => line.level === "error"), "not failed for good");
    } finally {
      await child.close();
    }
  });

  it("fails a child for good on its fifth start in a row killed before its handshake, and counts anew after a handshake", async () => {
    const state = mkdtempSync(join(directory, "bound-"));
    const child = chaosChild(state);
    try {
      await child.listTools();
      await killRunning(readPids(state).at(-1) ?? 0);
      for (let start = 1; start <= 4; start++)
        assert.equal((await killNextStart(child, state, `a${start}`)).code, "child_exited");
      // A finished handshake: the count starts over.
      await killRunning(await echo(child, "between"));
      for (let start = 1; start <= 4; start++)
        assert.equal((await killNextStart(child, state, `b${start}`)).code, "child_exited");
      const fifth = await killNextStart(child, state, "b5");
      assert.equal(fifth.code, "child_failed", fifth.message);
      assert.match(fifth.message, /\(5 starts in a row killed before their handshake\)/);
      const spawned = readPids(state).length;
      assert.equal((await failing(child, "later")).code, "child_failed");
      assert.equal(readPids(state).length, spawned, "a child failed for good is not started again");
    } finally {
      await child.close();
    }
  });

  it("answers child_closed for a restart killed in its handshake as its module closes", async () => {
    const state = mkdtempSync(join(directory, "closing-"));
    const child = chaosChild(state);
    let closing: Promise<void> | undefined;
    try {
      await killRunning(await echo(child, "first"));
      const flag = join(state, "hang-start");
      writeFileSync(flag, "");
      const call = failing(child, "restart");
      while (existsSync(flag)) await sleep(5);
      closing = child.close();
      process.kill(readPids(state).at(-1) ?? 0, "SIGKILL");
      const error = await call;
      assert.equal(error.code, "child_closed", error.message);
    } finally {
      await (closing ?? child.close());
    }
  });

  it("fails a child for good when a restart exits on its own before its handshake (its bundle broke)", async () => {
    const state = mkdtempSync(join(directory, "broken-"));
    const child = chaosChild(state);
    try {
      const first = await echo(child, "first");
      writeFileSync(join(state, "exit-start"), "");
      await killRunning(first);
      const error = await failing(child, "restart");
      assert.equal(error.code, "child_failed", error.message);
      assert.match(
        error.message,
        /exited before the MCP handshake \(exit code 2\); stderr: chaos-child: asked to exit/,
      );
      assert.equal((await failing(child, "later")).code, "child_failed");
      assert.equal(readPids(state).length, 2, "not started again");
    } finally {
      await child.close();
    }
  });

  it("fails a child for good when its first start is killed before its handshake (ADR 0203)", async () => {
    const state = mkdtempSync(join(directory, "first-"));
    const child = chaosChild(state);
    try {
      const error = await killNextStart(child, state, "first");
      assert.equal(error.code, "child_failed", error.message);
      assert.match(error.message, /exited before the MCP handshake \(signal SIGKILL\)/);
      assert.equal((await failing(child, "later")).code, "child_failed");
      assert.equal(readPids(state).length, 1);
    } finally {
      await child.close();
    }
  });
});
