/**
 * The pieces of `stdio-children.property.test.ts`: a round's random plan, the two hosts a chaos child
 * runs under (a module's tool set, or a node serving it over NATS to a mesh client), and the oracle.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { ToolCallResult } from "@tackle/core";
import { underLoadMs } from "@tackle/test-support";
import { loadModules, type MeshClient, startNodeRuntime } from "../src/index.ts";
import { fixture, meshConfig } from "./helpers.ts";

export type Action = "echo" | "garbage" | "huge" | "overflow" | "exit" | "hang";

export interface PlannedCall {
  readonly tag: string;
  /** When it is sent, from the phase's start. */
  readonly atMs: number;
  readonly action: Action;
  /** How long the child waits before doing it. */
  readonly ms: number;
  readonly size?: number;
  readonly timeoutMs: number;
  /** When its caller aborts it, from its send. */
  readonly abortAfterMs?: number;
}

export interface PhasePlan {
  readonly calls: readonly PlannedCall[];
  /** SIGKILL the child that last answered, this long into the phase. */
  readonly killAtMs?: number;
  /** Make the next start of the child hang in its handshake, this long into the phase. */
  readonly hangStartAtMs?: number;
  /**
   * SIGKILL the child started last and make its next start (a restart) hang in its handshake, this
   * long into the phase, then SIGKILL that start `killStartAfterMs` after it began (ADR 0227).
   */
  readonly killStartAtMs?: number;
  readonly killStartAfterMs?: number;
  /** Close the host this long into the phase, calls in flight (the tool-set host only). */
  readonly closeAtMs?: number;
}

export interface RoundPlan {
  readonly host: "direct" | "mesh";
  readonly child: "py" | "js";
  readonly maxInFlight: number;
  readonly phases: readonly PhasePlan[];
}

/** A size past the MCP SDK's 10 MiB read buffer: the SDK closes the transport on it. */
export const overflowBytes = 11 * 1024 * 1024;
const actions: readonly Action[] = ["echo", "echo", "echo", "garbage", "huge", "exit", "hang", "overflow"];

export function planRound(round: number, random: () => number): RoundPlan {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const host = random() < 0.5 ? "direct" : "mesh";
  const phases: PhasePlan[] = [];
  const phaseCount = 1 + Math.floor(random() * 2);
  for (let phase = 0; phase < phaseCount; phase++) {
    // A calm phase (only answers) checks each call that has time enough answers ok.
    const calm = random() < 0.3;
    const calls: PlannedCall[] = [];
    const count = 2 + Math.floor(random() * 9);
    for (let index = 0; index < count; index++) {
      const action = calm ? pick(["echo", "garbage", "huge"] as const) : pick(actions);
      const size =
        action === "huge"
          ? 1024 + Math.floor(random() * 3 * 1024 * 1024)
          : action === "overflow"
            ? overflowBytes
            : 0;
      calls.push({
        tag: `r${round}p${phase}c${index}-${Math.floor(random() * 1e9).toString(36)}`,
        atMs: Math.floor(random() * 400),
        action,
        ms: Math.floor(random() * (calm ? 150 : 600)),
        ...(size === 0 ? {} : { size }),
        timeoutMs: 150 + Math.floor(random() * 2500),
        ...(random() < 0.15 ? { abortAfterMs: Math.floor(random() * 500) } : {}),
      });
    }
    // A start hangs until its deadline (`child_failed`), or a restart is killed in its handshake.
    const start = calm ? 1 : random();
    phases.push({
      calls,
      ...(!calm && random() < 0.35 ? { killAtMs: Math.floor(random() * 800) } : {}),
      ...(start < 0.1 ? { hangStartAtMs: Math.floor(random() * 600) } : {}),
      ...(start >= 0.1 && start < 0.4
        ? { killStartAtMs: Math.floor(random() * 300), killStartAfterMs: Math.floor(random() * 200) }
        : {}),
      ...(!calm && host === "direct" && random() < 0.15
        ? { closeAtMs: 100 + Math.floor(random() * 900) }
        : {}),
    });
  }
  return { host, child: random() < 0.5 ? "py" : "js", maxInFlight: 2 + Math.floor(random() * 7), phases };
}

export function isCalm(phase: PhasePlan): boolean {
  return (
    phase.killAtMs === undefined &&
    phase.hangStartAtMs === undefined &&
    phase.killStartAtMs === undefined &&
    phase.closeAtMs === undefined &&
    phase.calls.every((call) => ["echo", "garbage", "huge"].includes(call.action))
  );
}

/**
 * SIGKILLs the child started last and makes its next start hang in its handshake; once a start took
 * the flag (within `windowMs`, else the flag is taken away), SIGKILLs it `afterMs` later, in its
 * handshake. Every start after the host's first is a restart. Resolves whether a start was killed so.
 */
export async function killRestart(state: string, afterMs: number, windowMs: number): Promise<boolean> {
  const flag = join(state, "hang-start");
  writeFileSync(flag, "");
  const running = readPids(state).at(-1);
  if (running !== undefined && isRunning(running)) process.kill(running, "SIGKILL");
  const deadline = performance.now() + windowMs;
  while (existsSync(flag) && performance.now() < deadline) await sleep(5);
  try {
    rmSync(flag);
    return false; // no start came
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  // A start appends its pid before it takes the flag: the last pid is the one hanging.
  const hung = readPids(state).at(-1);
  await sleep(afterMs);
  if (hung === undefined || !isRunning(hung)) return false;
  process.kill(hung, "SIGKILL");
  return true;
}

/** A phase in which the child may die: a call exits it or overflows the SDK's buffer, or the test kills it. */
export function mayDie(phase: PhasePlan): boolean {
  return (
    phase.killAtMs !== undefined ||
    phase.killStartAtMs !== undefined ||
    phase.closeAtMs !== undefined ||
    phase.calls.some((call) => call.action === "exit" || call.action === "overflow")
  );
}

export interface Host {
  call(
    args: Record<string, unknown>,
    options: { timeoutMs: number; signal: AbortSignal },
  ): Promise<ToolCallResult>;
  close(): Promise<void>;
}

export interface HostSetting {
  readonly plan: RoundPlan;
  /** The child's state directory: its pids, the hang-start flag. */
  readonly directory: string;
  readonly brokerUrl: string;
  readonly client: MeshClient;
}

export async function startHost({ plan, directory, brokerUrl, client }: HostSetting): Promise<Host> {
  const path = fixture(plan.child === "py" ? "chaos-child.py" : "chaos-child.mjs");
  const child = {
    maxInFlight: plan.maxInFlight,
    handshakeTimeoutMs: underLoadMs(2_000),
    restartBackoff: { initialMs: 20, maxMs: 200 },
  };
  if (plan.host === "direct") {
    const [loaded] = await loadModules([{ module: "chaos", path }], {
      env: { MESH_OPERATOR_HOME: directory },
      child,
    });
    assert.ok(loaded);
    assert.deepEqual(loaded.errors, []);
    return {
      call: (args, options) => loaded.toolset.call("act", args, options),
      close: () => loaded.close(),
    };
  }
  const module = `chaos-${plan.child}`;
  const runtime = await startNodeRuntime({
    config: { ...meshConfig("node-chaos", brokerUrl, [{ module, path }]), operatorHome: directory },
    load: { child },
  });
  return {
    call: (args, options) => client.call(`${module}.act`, args, options),
    close: () => runtime.close(),
  };
}

export function readPids(directory: string): number[] {
  const file = join(directory, "pids");
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8").split("\n").filter(Boolean).map(Number);
}

export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw error;
  }
}

export interface Answered {
  readonly call: PlannedCall;
  readonly result: ToolCallResult;
  /** From its send to its answer. */
  readonly tookMs: number;
}

/** What the oracle allows one call to answer, given the phase it ran in; undefined when it holds. */
export function judge(
  answered: Answered,
  phase: PhasePlan,
  slackMs: number,
  roomMs: number,
): string | undefined {
  const { call, result, tookMs } = answered;
  const limit = Math.min(call.timeoutMs, call.abortAfterMs ?? Number.POSITIVE_INFINITY);
  if (tookMs > limit + slackMs) return `answered after ${tookMs} ms, past its limit ${limit} ms + ${slackMs}`;
  if (result.ok) {
    if (call.action === "exit" || call.action === "hang") return `ok from an ${call.action}`;
    const output = result.output as { tag?: unknown };
    if (output?.tag !== call.tag) return `answered another call's output ${JSON.stringify(result.output)}`;
    return undefined;
  }
  const { code } = result.error;
  const allowed =
    (code === "timeout" && tookMs >= call.timeoutMs - 20) ||
    (code === "aborted" && call.abortAfterMs !== undefined && tookMs >= call.abortAfterMs - 5) ||
    (code === "child_exited" && mayDie(phase)) ||
    (code === "child_failed" && phase.hangStartAtMs !== undefined) ||
    (code === "child_closed" && phase.closeAtMs !== undefined);
  if (!allowed) return `answered ${code} after ${tookMs} ms: ${result.error.message}`;
  // In a calm phase a call with time for every call's wait and some room answers ok.
  const waits = phase.calls.reduce((sum, other) => sum + other.ms, 0);
  if (isCalm(phase) && call.abortAfterMs === undefined && call.timeoutMs >= waits + roomMs)
    return `answered ${code} in a calm phase with ${call.timeoutMs} ms for ${waits} ms of waits`;
  return undefined;
}
