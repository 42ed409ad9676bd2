/**
 * `--approve <tool>` and `--approval-expires <seconds>`, shared by `serve` and `mcp`: which tool calls
 * wait for a person's approval (ADR 0265), and for how long. The paused calls live in
 * `$TACKLE_HOME/mcp-approvals.sqlite`, so any console or `tackle mcp` on the same home may answer them.
 */
import { join } from "node:path";
import type { Command } from "commander";
import { tackleHome } from "../config/tackle-home.ts";
import type { ApprovalCalls } from "../mcp/approval-calls.ts";
import { CliError } from "../program/cli-error.ts";
import type { ToolSource } from "../tool-source/tool-source.ts";

export interface ApprovalFlags {
  approve?: string[];
  approvalExpires?: number;
}

export function approvalOptions(command: Command): Command {
  return command
    .option(
      "--approve <tool>",
      "a tool whose calls wait for a person's approval (module.tool, module.*, or *); repeatable. MCP clients that support elicitation are asked in a form; others answer with tackle.approve",
      (value: string, previous: string[] = []) => [...previous, readPattern(value)],
    )
    .option(
      "--approval-expires <seconds>",
      "how long an approval stays open (default 600); unanswered, the call stays paused",
      readSeconds,
    );
}

/** The approvals the flags ask for, or undefined when none (nothing durable is opened then). */
export async function openApprovals(
  flags: ApprovalFlags,
  source: ToolSource,
  env: NodeJS.ProcessEnv,
): Promise<ApprovalCalls | undefined> {
  if (flags.approve === undefined || flags.approve.length === 0) return undefined;
  // Loaded only when asked for: the durable runner is not paid for otherwise.
  const { createApprovalCalls } = await import("../mcp/approval-calls.ts");
  return createApprovalCalls(source, {
    tools: flags.approve,
    store: join(tackleHome(env), "mcp-approvals.sqlite"),
    ...(flags.approvalExpires === undefined ? {} : { expiresInMs: flags.approvalExpires * 1000 }),
  });
}

/** The flags as given, for `--print-config`'s entries. */
export function approvalFlags(flags: ApprovalFlags): string[] {
  return [
    ...(flags.approve ?? []).flatMap((pattern) => ["--approve", pattern]),
    ...(flags.approvalExpires === undefined ? [] : ["--approval-expires", String(flags.approvalExpires)]),
  ];
}

function readPattern(value: string): string {
  if (value === "*" || /^[^.\s*]+\.(\*|[^\s*]+)$/.test(value)) return value;
  throw new CliError("invalid_arguments", `--approve: "${value}" is not module.tool, module.* or *`, {
    exitCode: 2,
  });
}

function readSeconds(value: string): number {
  const seconds = Number(value);
  if (/^\d+(\.\d+)?$/.test(value.trim()) && seconds > 0) return seconds;
  throw new CliError("invalid_arguments", `--approval-expires: "${value}" is not a number of seconds > 0`, {
    exitCode: 2,
  });
}
