/**
 * A stdio child's long lines (found by `stdio-children.property.test.ts`): one past the MCP SDK's
 * 10 MiB read buffer, and one just under it.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { ToolCallResult } from "@tackle/core";
import { underLoadMs } from "@tackle/test-support";
import { loadModules } from "../src/index.ts";
import { fixture } from "./helpers.ts";

async function loadChaos(name: string, directory: string) {
  const [loaded] = await loadModules([{ module: "chaos", path: fixture(name) }], {
    env: { MESH_OPERATOR_HOME: directory },
    child: { handshakeTimeoutMs: underLoadMs(10_000), restartBackoff: { initialMs: 10 } },
  });
  assert.ok(loaded);
  assert.deepEqual(loaded.errors, []);
  return loaded;
}

const pidOf = (result: ToolCallResult) => (result.ok ? (result.output as { pid: number }).pid : undefined);

describe("stdio children: long lines", () => {
  it("stops a child whose line overflows the SDK's read buffer: its calls fail child_exited, later ones reach a new child", async () => {
    const directory = mkdtempSync(join(tmpdir(), "tackle-overflow-"));
    // The JavaScript child stays up after its stdin ends while a timer of a call runs: the SDK, having
    // given the connection up, waited 2 s for it before a SIGTERM, and meanwhile every call sent to it
    // failed "Not connected" as the tool's failure (`tool_failed`, not retryable).
    const chaos = await loadChaos("chaos-child.mjs", directory);
    try {
      const first = pidOf(await chaos.toolset.call("act", { tag: "first" }));
      assert.ok(first !== undefined);
      const slow = chaos.toolset.call("act", { tag: "slow", ms: 5_000 });
      const overflow = chaos.toolset.call("act", { tag: "overflow", do: "huge", size: 11 * 1024 * 1024 });
      let overflowed: ToolCallResult | undefined;
      void overflow.then((result) => {
        overflowed = result;
      });
      // Calls sent every 50 ms until the overflowing call answered, and five after it.
      const meanwhile: Promise<ToolCallResult>[] = [];
      const send = () => meanwhile.push(chaos.toolset.call("act", { tag: `meanwhile-${meanwhile.length}` }));
      do {
        send();
        await sleep(50);
      } while (overflowed === undefined);
      const sentBefore = meanwhile.length;
      for (let index = 0; index < 5; index++) {
        send();
        await sleep(50);
      }
      const answers = (await Promise.all(meanwhile)).map((result, index) => {
        if (!result.ok) return result.error.code;
        assert.deepEqual(result.output, { tag: `meanwhile-${index}`, pid: pidOf(result) });
        return pidOf(result) === first ? "ok" : "ok from a new child";
      });
      const said = `answers of the calls sent meanwhile: ${answers.join(", ")}`;
      assert.deepEqual(
        answers
          .slice(0, sentBefore)
          .filter((code) => !["ok", "ok from a new child", "child_exited"].includes(code)),
        [],
        said,
      );
      // Once the overflowing call answered, the child was gone: the calls after it reach a new one.
      assert.deepEqual(answers.slice(sentBefore), Array(5).fill("ok from a new child"), said);
      assert.equal(overflowed.ok ? "ok" : overflowed.error.code, "child_exited", JSON.stringify(overflowed));
      assert.match(overflowed.ok ? "" : overflowed.error.message, /past the MCP SDK's 10 MiB read buffer/);
      const slowly = await slow;
      assert.equal(
        slowly.ok ? "ok" : slowly.error.code,
        "child_exited",
        "the call in flight fails with the exit",
      );
    } finally {
      await chaos.close();
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it("fails a call the module closes under with a child code, never as the tool's failure", async () => {
    const codes: string[] = [];
    // The close comes 0–7 microtasks after the call: at 1–6 the call has taken the child and not yet
    // written to it. It said "Not connected" there, and failed `tool_failed`, not retryable.
    for (let depth = 0; depth < 8; depth++) {
      const directory = mkdtempSync(join(tmpdir(), "tackle-close-race-"));
      const chaos = await loadChaos("chaos-child.py", directory);
      try {
        const answer = chaos.toolset.call("act", { tag: `depth-${depth}` });
        for (let tick = 0; tick < depth; tick++) await Promise.resolve();
        await chaos.close();
        const result = await answer;
        codes.push(result.ok ? "ok" : result.error.code);
      } finally {
        await chaos.close();
        rmSync(directory, { recursive: true, force: true });
      }
    }
    assert.deepEqual(
      codes.filter((code) => !["ok", "child_exited", "child_closed"].includes(code)),
      [],
      codes.join(", "),
    );
  });

  it("reads a line just under the buffer in time linear in its length", async () => {
    const directory = mkdtempSync(join(tmpdir(), "tackle-long-line-"));
    const chaos = await loadChaos("chaos-child.py", directory);
    try {
      await chaos.toolset.call("act", { tag: "warm" });
      // The SDK joined its buffer and looked for a line break from its start on every chunk: this
      // line cost the node 3–11 s of CPU. Whole lines only, it costs tens of milliseconds.
      const before = process.cpuUsage();
      const result = await chaos.toolset.call(
        "act",
        { tag: "long", do: "huge", size: 9 * 1024 * 1024 },
        { timeoutMs: underLoadMs(60_000) },
      );
      const used = process.cpuUsage(before);
      assert.deepEqual(result, { ok: true, output: { tag: "long", pid: pidOf(result) } });
      const cpuMs = (used.user + used.system) / 1000;
      assert.ok(cpuMs < 1_000, `reading the line took ${Math.round(cpuMs)} ms of CPU`);
    } finally {
      await chaos.close();
      rmSync(directory, { recursive: true, force: true });
    }
  });
});
