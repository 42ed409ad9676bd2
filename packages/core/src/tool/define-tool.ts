/** `defineTool`: one tool, defined once, with its schemas, annotations and handler. */
import { ToolDefinitionError } from "../errors/tool-definition-error.ts";
import type { JsonSchema, StandardSchemaV1, ToolSchema } from "../schema/schema.ts";
import { toJsonSchema } from "../schema/schema.ts";
import type { Logger } from "./logger.ts";

/** Who is calling: a tenant, a user, an agent. Opaque to core; handed through to the tool. */
export type Identity = Readonly<Record<string, string | undefined>>;

/** What a tool's handler receives besides its arguments. */
export interface ToolContext {
  /** Aborts when the caller cancels or the call times out. */
  readonly signal: AbortSignal;
  /** This call's id (the model's tool-call id when there is one). */
  readonly callId: string;
  /** Stable across retries of the same logical call: use it to make side effects idempotent. */
  readonly idempotencyKey: string;
  /**
   * Present when this call takes over an earlier run under the same `idempotencyKey` whose host died
   * mid-call (a mesh node SIGKILLed while the tool ran, ADR 0213): that run's effect may have landed.
   * A tool with an effect looks it up by the key before making it again (or declares `recover`).
   */
  readonly takeover?: ToolTakeover;
  readonly identity?: Identity;
  /** Log lines; an MCP client that asked for logging receives them as log messages. */
  readonly logger: Logger;
  /**
   * Reports how far the call has come (`total` when known); an MCP client that sent a progress token
   * receives each report as a progress notification. A no-op when nobody listens.
   */
  readonly progress: (progress: number, total?: number, message?: string) => void;
  /**
   * Whether anyone receives `progress` reports (an MCP client that sent a progress token): a tool
   * that relays a remote tool asks that one for progress only when this is true.
   */
  readonly progressWanted: boolean;
  /**
   * What the calling client can be asked while the call runs, when the host reaches one that can
   * (an MCP client that declared elicitation or sampling); absent otherwise, so a tool keeps a path
   * that needs neither.
   */
  readonly client?: ToolClient;
}

/** An earlier run under the same idempotency key, whose host died before its outcome was recorded. */
export interface ToolTakeover {
  /** The node (or host) that ran the key before. */
  readonly node: string;
  /** When that run began (ISO 8601). */
  readonly startedAt: string;
}

/**
 * What `recover` found of an earlier run under the call's idempotency key: its effect landed (and
 * `output` is what that run answered, or would have), or it did not (the tool is then run).
 */
export type Recovered<Output> =
  | { readonly landed: true; readonly output: Output }
  | { readonly landed: false };

/**
 * Requests a tool may make of the client that called it (MCP's elicitation and sampling), in MCP's
 * own shapes. Each is present only when the client declared the capability.
 */
export interface ToolClient {
  /** Asks the person at the client for input: `elicitation/create`, a form of `requestedSchema`. */
  readonly elicit?: (request: ElicitRequest, options?: ClientRequestOptions) => Promise<ElicitAnswer>;
  /** Asks the client's model for a message: `sampling/createMessage`. */
  readonly sample?: (
    request: Record<string, unknown>,
    options?: ClientRequestOptions,
  ) => Promise<Record<string, unknown>>;
}

export interface ElicitRequest {
  readonly message: string;
  /** A flat JSON Schema object of primitive properties (MCP's form elicitation). */
  readonly requestedSchema: Record<string, unknown>;
}

export interface ElicitAnswer {
  readonly action: "accept" | "decline" | "cancel";
  readonly content?: Record<string, unknown>;
}

export interface ClientRequestOptions {
  readonly signal?: AbortSignal;
  /** How long to wait for the client's answer before the request fails. */
  readonly timeoutMs?: number;
}

/** One progress report of a running call. */
export interface ToolProgress {
  readonly progress: number;
  readonly total?: number;
  readonly message?: string;
}

/** MCP-style hints about what a tool does; advisory, for clients and UIs. */
export interface ToolAnnotations {
  readonly title?: string;
  readonly readOnlyHint?: boolean;
  readonly destructiveHint?: boolean;
  readonly idempotentHint?: boolean;
  readonly openWorldHint?: boolean;
}

/**
 * `Input` is what the handler receives (the schema's parsed type); `Args` is what a caller passes (the
 * schema's input type: a field with a default may be left out).
 */
export interface ToolDefinition<Input, Output, Name extends string = string, Args = Input> {
  /** `^[A-Za-z0-9_.-]{1,128}$`; `module.tool` by convention. Kept as a literal type by `defineTool`. */
  readonly name: Name;
  readonly description: string;
  readonly input: ToolSchema<Args, Input>;
  readonly output?: StandardSchemaV1<unknown, Output> & Partial<ToolSchema<unknown, Output>>;
  readonly annotations?: ToolAnnotations;
  /** Per-tool time limit in ms; a call may override it. */
  readonly timeoutMs?: number;
  /** Where the tool comes from (a file, a bundle, a server), named when a duplicate is refused. */
  readonly source?: string;
  readonly execute: (input: Input, context: ToolContext) => Output | Promise<Output>;
  /**
   * Asked on a takeover only (`context.takeover` set), before `execute`: whether the earlier run's
   * effect landed, looked up by `context.idempotencyKey` in the tool's own store. Landed, its output
   * is the call's answer and `execute` does not run; not landed, `execute` runs. A tool that declares
   * neither this nor `readOnlyHint`/`idempotentHint` is run again on a takeover, told so by
   * `context.takeover` (ADR 0213).
   */
  readonly recover?: (input: Input, context: ToolContext) => Recovered<Output> | Promise<Recovered<Output>>;
}

/** A defined tool: the definition plus its derived JSON Schemas and its source. */
// biome-ignore lint/suspicious/noExplicitAny: a tool of unknown types must accept and return anything
export interface Tool<Input = any, Output = any, Name extends string = string, Args = Input>
  extends ToolDefinition<Input, Output, Name, Args> {
  readonly source: string;
  readonly inputJsonSchema: JsonSchema;
  readonly outputJsonSchema?: JsonSchema;
}

// biome-ignore lint/suspicious/noExplicitAny: see Tool
export type AnyTool = Tool<any, any>;

const toolNamePattern = /^[A-Za-z0-9_.-]{1,128}$/;

/**
 * Defines a tool. The name and schemas are checked here, once; JSON Schema is derived here, once.
 * The name's literal type is kept, so a tool set built from typed tools checks calls by name.
 */
export function defineTool<Input, Output, const Name extends string, Args = Input>(
  definition: ToolDefinition<Input, Output, Name, Args>,
): Tool<Input, Output, Name, Args> {
  const source = definition.source ?? callerLocation();
  if (typeof definition.name !== "string" || !toolNamePattern.test(definition.name)) {
    throw new ToolDefinitionError(
      "invalid_tool_definition",
      `Invalid tool name ${JSON.stringify(definition.name)} (${source}): names match ^[A-Za-z0-9_.-]{1,128}$`,
      { name: definition.name, source },
    );
  }
  if (typeof definition.execute !== "function") {
    throw new ToolDefinitionError(
      "invalid_tool_definition",
      `Tool "${definition.name}" (${source}) has no execute function`,
      {
        name: definition.name,
        source,
      },
    );
  }
  if (definition.recover !== undefined && typeof definition.recover !== "function") {
    throw new ToolDefinitionError(
      "invalid_tool_definition",
      `Tool "${definition.name}" (${source}): recover, when given, is a function`,
      { name: definition.name, source },
    );
  }
  const inputJsonSchema = deriveJsonSchema(definition.name, source, definition.input, "input");
  const outputJsonSchema =
    definition.output?.["~standard"] && "jsonSchema" in definition.output["~standard"]
      ? deriveJsonSchema(definition.name, source, definition.output as ToolSchema, "output")
      : undefined;
  return Object.freeze({
    ...definition,
    source,
    inputJsonSchema,
    ...(outputJsonSchema === undefined ? {} : { outputJsonSchema }),
  });
}

function deriveJsonSchema(
  name: string,
  source: string,
  schema: ToolSchema,
  side: "input" | "output",
): JsonSchema {
  if (schema?.["~standard"]?.jsonSchema === undefined) {
    throw new ToolDefinitionError(
      "invalid_tool_definition",
      `Tool "${name}" (${source}): its ${side} schema cannot describe itself as JSON Schema; use zod 4 or jsonSchema()`,
      { name, source },
    );
  }
  try {
    return toJsonSchema(schema, side);
  } catch (error) {
    throw new ToolDefinitionError(
      "invalid_tool_definition",
      `Tool "${name}" (${source}): its ${side} schema has no JSON Schema form: ${(error as Error).message}`,
      { name, source },
    );
  }
}

/** The file and line that called defineTool, so a refused duplicate can name both definitions. */
function callerLocation(): string {
  const lines = new Error().stack?.split("\n") ?? [];
  const frame = lines
    .slice(1)
    .find((line) => !line.includes("define-tool.") && !line.includes("node:internal"));
  const match = frame?.match(/\(?((?:file:\/\/|\/)[^()]+?):(\d+):\d+\)?$/);
  return match ? `${match[1]!.replace("file://", "")}:${match[2]}` : "unknown source";
}
