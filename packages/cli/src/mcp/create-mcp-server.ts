/** Builds the MCP server (one per request, per console session or per stdio connection) that exposes a tool source as `module.tool`. */

import { randomUUID } from "node:crypto";
import {
  type CallToolResult,
  type Tool as McpTool,
  Server,
  type ServerContext,
} from "@modelcontextprotocol/server";
import type { ClientRequestOptions, ToolClient } from "@tackle/core";
import { keepSentArguments } from "@tackle/core/internal";
import { createResultPages, mcpCallOptions, type ResultPages, toCallToolResult } from "@tackle/core/mcp";
import { splitToolName } from "../tool-source/split-tool-name.ts";
import type { ModuleInfo, SourceCallOptions, ToolInfo, ToolSource } from "../tool-source/tool-source.ts";
import type { ApprovalCalls } from "./approval-calls.ts";
import { isSeatTool } from "./module-contributions.ts";
import { contributionCapabilities, registerContributions } from "./register-contributions.ts";
import { atClientLevel, keepLogLevel, toolLogLevel } from "./requested-log-level.ts";

/** The console's own tool: every module with its status and errors, so none is silently missing. */
export const modulesToolName = "tackle.modules";

const modulesTool: McpTool = {
  name: modulesToolName,
  description:
    "Lists every module this node or mesh holds with its status (ok, failed, unreachable), its node, its tools and load errors, and the source's own errors (such as the broker being unreachable). Call it when a tool you expect is missing.",
  inputSchema: { type: "object", properties: {}, additionalProperties: false },
  annotations: { readOnlyHint: true },
};

/**
 * A request `_meta` key: `"none"` asks for the whole result, unbudgeted. The console tool source sends
 * it, so `tackle call --console` prints whole results and `tackle mcp --console` budgets its own answers
 * (with cursors its own paging tool knows).
 */
export const resultBudgetMetaKey = "tackle/resultBudget";

export interface McpServerOptions {
  readonly name?: string;
  readonly version?: string;
  /** The answer budget and the kept overflow behind its paging tool. Default: a fresh one, 8,000 tokens. */
  readonly resultPages?: ResultPages;
  /**
   * Whose cursors this server's answers make and may read. Default: a fresh random owner, so one
   * server (one stdio connection, one console session) reads only its own.
   */
  readonly owner?: string;
  /**
   * Tool calls that wait for a person's approval (`createApprovalCalls`), asked through elicitation
   * where the client can; its `tackle.approve` and `tackle.approvals` join the tools. Default: none.
   */
  readonly approvals?: ApprovalCalls;
}

/** Where a server's tool answers are budgeted: the pages and the owner of the cursors it makes. */
export interface ResultBudget {
  readonly pages: ResultPages;
  readonly owner: string;
  /** The caller asked for the whole result (`resultBudgetMetaKey`). */
  readonly unbudgeted?: boolean;
  /** Calls that wait for approval, and the tools that answer them. */
  readonly approvals?: ApprovalCalls | undefined;
}

/** The server's name and version as it reports them. */
export function serverIdentity(options: McpServerOptions = {}): { name: string; version: string } {
  return { name: options.name ?? "tackle", version: options.version ?? "0.1.0" };
}

/**
 * A `tools/call` on the source: `tackle.modules`, the paging tool or `module.tool`, mapped to a
 * `CallToolResult` that fits the budget. The server's handler and the console's direct path for
 * session-less calls both answer through it.
 */
export async function callSourceTool(
  source: ToolSource,
  name: string,
  args: Record<string, unknown> | undefined,
  options: SourceCallOptions,
  budget: ResultBudget,
): Promise<CallToolResult> {
  if (name === modulesToolName) {
    const modules = await source.catalogue();
    // `errors`: what is wrong with the source itself (the broker unreachable), beside each module's own.
    const errors = source.errors?.() ?? [];
    // Whole, never cut: `tackle mcp --console` reads the catalogue through it.
    return toCallToolResult({ ok: true, output: { modules, errors } });
  }
  if (name === budget.pages.tool.name) return budget.pages.page(args, budget.owner);
  const approvals = budget.approvals;
  const called =
    approvals !== undefined && (approvals.owns(name) || approvals.needs(name))
      ? await approvals.call(name, args ?? {}, options)
      : await source.call(name, args ?? {}, options);
  const result = toCallToolResult(called, name);
  if (budget.unbudgeted === true) return result;
  // Past the budget, structured content the advertised output schema describes is kept when it fits
  // and otherwise left out, the cut answer an `answer_too_large` error a client does not reject (ADR 0272).
  const declares =
    result.structuredContent !== undefined &&
    result.isError !== true &&
    !fitsInBytes(result, budget.pages.budget) &&
    (await advertisesOutputSchema(source, name, approvals));
  return budget.pages.fit(result, budget.owner, { tool: name, outputSchema: declares });
}

/**
 * Whether an answer surely fits `budget` tokens without counting them (a token is at least one UTF-8
 * byte): its text and structure within the budget in bytes. Such an answer passes unchanged, so its
 * tool's schema is not looked up (a catalogue read, a round trip for `tackle mcp --console`).
 */
function fitsInBytes(result: CallToolResult, budget: number): boolean {
  let bytes = 0;
  for (const block of result.content) {
    if (block.type !== "text") return false;
    bytes += Buffer.byteLength(block.text);
    if (bytes > budget) return false;
  }
  const structured = result.structuredContent;
  return structured === undefined || bytes + Buffer.byteLength(JSON.stringify(structured)) <= budget;
}

/**
 * Whether `tools/list` advertises an output schema for `module.tool`: its tool declares an object
 * output and its calls do not wait for approval (such a call may answer its paused state instead).
 */
function advertises(tool: ToolInfo, name: string, approvals: ApprovalCalls | undefined): boolean {
  return tool.outputSchema?.type === "object" && approvals?.needs(name) !== true;
}

async function advertisesOutputSchema(
  source: ToolSource,
  name: string,
  approvals: ApprovalCalls | undefined,
): Promise<boolean> {
  const parts = splitToolName(name);
  if (parts === undefined) return false;
  const info = (await source.catalogue()).find((module) => module.module === parts.module);
  const tool = info?.tools.find((candidate) => candidate.name === parts.tool);
  return tool !== undefined && advertises(tool, name, approvals);
}

/** Whether a request's `_meta` asks for the whole result. */
export function asksUnbudgeted(meta: unknown): boolean {
  return (
    typeof meta === "object" &&
    meta !== null &&
    (meta as Record<string, unknown>)[resultBudgetMetaKey] === "none"
  );
}

export function createMcpServer(source: ToolSource, options: McpServerOptions = {}): Server {
  const pages = options.resultPages ?? createResultPages();
  const owner = options.owner ?? randomUUID();
  const server = new Server(serverIdentity(options), {
    capabilities: { tools: {}, logging: {}, ...contributionCapabilities },
    instructions: `Tackle ${source.description}: tools are named module.tool. ${modulesToolName} reports modules that failed to load or did not answer. An answer past ${pages.budget} tokens is cut and ends with a cursor; ${pages.tool.name} reads the next part.`,
  });
  server.setRequestHandler("tools/list", async () => {
    const modules = await source.catalogue();
    const approvals = options.approvals;
    const tools: McpTool[] = [modulesTool, pages.tool, ...(approvals?.tools ?? [])];
    for (const info of modules) {
      for (const tool of info.tools) {
        // The `mcp` seat's verbs serve resources, prompts and completion, not the model.
        if (isSeatTool(tool.name)) continue;
        const name = `${info.module}.${tool.name}`;
        tools.push({
          name,
          description:
            approvals?.needs(name) === true
              ? `${tool.description} (A person approves each call before it runs.)`
              : tool.description,
          inputSchema: { ...tool.inputSchema, type: "object" },
          // A call that waits for approval may answer its paused state instead of the tool's output.
          ...(advertises(tool, name, approvals)
            ? { outputSchema: tool.outputSchema as McpTool["outputSchema"] }
            : {}),
        });
      }
    }
    const errors = source.errors?.() ?? [];
    return {
      tools,
      _meta: {
        "tackle/modules": modules.map(moduleStatus),
        ...(errors.length === 0 ? {} : { "tackle/errors": errors }),
      },
    };
  });
  registerContributions(server, source);
  const requestedLevel = keepLogLevel(server);
  const sent = new WeakMap<object, unknown>();
  server.setRequestHandler("tools/call", async (request, context) => {
    const { name } = request.params;
    // As the client sent them: the SDK's parse of a record drops a top-level `__proto__` key, which
    // the tool's own schema judges (a strict one refuses it, a pass-through one keeps it; ADR 0277).
    const args = (sent.has(context) ? sent.get(context) : request.params.arguments) as
      | Record<string, unknown>
      | undefined;
    // Progress and log lines travel only when the client asked: a progress token, a log level.
    const level = requestedLevel(context);
    const logLevel = toolLogLevel(level);
    const callOptions = mcpCallOptions(context, undefined, name);
    const result = await callSourceTool(
      source,
      name,
      args,
      {
        ...callOptions,
        logger: atClientLevel(callOptions.logger, level),
        ...(logLevel === undefined ? {} : { logLevel }),
        ...clientOf(server, context),
      },
      { pages, owner, unbudgeted: asksUnbudgeted(request.params._meta), approvals: options.approvals },
    );
    return server.projectCallToolResult(result, undefined);
  });
  keepSentArguments(server, sent);
  return server;
}

/**
 * What the tool may ask the client, from the capabilities it declared at initialize (a 2025 session or
 * stdio connection; a 2026-07-28 request is answered without: its client is asked by other means).
 */
function clientOf(server: Server, context: ServerContext): { client?: ToolClient } {
  const capabilities = server.getClientCapabilities();
  if (capabilities === undefined || context.mcpReq.envelope !== undefined) return {};
  const client: { -readonly [K in keyof ToolClient]: ToolClient[K] } = {};
  const options = (asked: ClientRequestOptions | undefined) => ({
    ...(asked?.signal === undefined ? {} : { signal: asked.signal }),
    ...(asked?.timeoutMs === undefined ? {} : { timeout: asked.timeoutMs }),
  });
  if (capabilities.elicitation !== undefined) {
    client.elicit = async (request, asked) => {
      const answer = await context.mcpReq.elicitInput(
        { message: request.message, requestedSchema: request.requestedSchema as never },
        options(asked),
      );
      return answer.content === undefined
        ? { action: answer.action }
        : { action: answer.action, content: answer.content as Record<string, unknown> };
    };
  }
  if (capabilities.sampling !== undefined) {
    client.sample = async (request, asked) =>
      (await context.mcpReq.requestSampling(request as never, options(asked))) as Record<string, unknown>;
  }
  return Object.keys(client).length === 0 ? {} : { client };
}

function moduleStatus(info: ModuleInfo) {
  return {
    module: info.module,
    status: info.status,
    ...(info.node === undefined ? {} : { node: info.node }),
    tools: info.tools.length,
    errors: info.errors,
  };
}
