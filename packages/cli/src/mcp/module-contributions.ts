/**
 * What modules contribute to MCP beyond tools — resources, resource templates, prompts and completion —
 * read through the `mcp` seat (ADR 0264): a module that offers them serves tools named `mcp.<verb>`,
 * which the console and `tackle mcp` call like any other tool, whatever the source (in this process,
 * on a mesh node, through a console). They are the server's, not the model's: `tools/list` leaves
 * them out.
 */
import {
  type CompleteResult,
  type GetPromptResult,
  type Prompt,
  ProtocolError,
  ProtocolErrorCode,
  type ReadResourceResult,
  type Resource,
  ResourceNotFoundError,
  type ResourceTemplateType as ResourceTemplate,
  UriTemplate,
} from "@modelcontextprotocol/server";
import type { ModuleInfo, SourceCallOptions, ToolSource } from "../tool-source/tool-source.ts";

/** The seat's verbs, as tool names of the module. */
export const mcpSeat = {
  /** `{}` → `{ resources?: Resource[], resourceTemplates?: ResourceTemplate[] }` */
  resources: "mcp.resources",
  /** `{ uri }` → `{ contents }`; a `not_found` error for a URI it does not hold. */
  read: "mcp.read",
  /** `{}` → `{ prompts: Prompt[] }` (bare names; the server qualifies them `module.name`). */
  prompts: "mcp.prompts",
  /** `{ name, arguments }` → `GetPromptResult`. */
  prompt: "mcp.prompt",
  /** `{ ref, argument, context? }` (the prompt's bare name) → `{ values, total?, hasMore? }`. */
  complete: "mcp.complete",
  /**
   * `{ uris }` → `{ versions: { [uri]: string } }`: a token that changes whenever the resource does
   * (a document's last change), read from the module's store, so a change made anywhere shows. The
   * server polls it for the URIs its client subscribed to; a module without it sends no updates.
   */
  versions: "mcp.versions",
} as const;

/** Whether a module's tool is one of the `mcp` seat's verbs (left out of `tools/list`). */
export function isSeatTool(name: string): boolean {
  return name.startsWith("mcp.");
}

/**
 * The modules as a person should see them (`tackle tools`, the web page's listing): the seat's verbs
 * left out, since they serve the MCP server, not a caller. The console's own `tackle.modules` keeps
 * them: a source reading another console finds the seat through it.
 */
export function withoutSeatTools(modules: readonly ModuleInfo[]): ModuleInfo[] {
  return modules.map((info) =>
    info.tools.some((tool) => isSeatTool(tool.name))
      ? { ...info, tools: info.tools.filter((tool) => !isSeatTool(tool.name)) }
      : info,
  );
}

/** Resources and prompts per page of `resources/list`, `resources/templates/list` and `prompts/list`. */
const pageSize = 100;
/** MCP's bound on completion values in one answer. */
const maxCompletions = 100;
/**
 * How long a module may take to complete a value: completion runs as a person types, and a slow
 * answer is worth nothing. Past it the answer is empty (and says there may be more).
 */
export const completionTimeoutMs = 2_000;

interface Listing {
  readonly resources: (Resource & { module: string })[];
  readonly templates: (ResourceTemplate & { module: string })[];
}

export interface ModuleContributions {
  listResources(cursor: string | undefined): Promise<{ resources: Resource[]; nextCursor?: string }>;
  listTemplates(
    cursor: string | undefined,
  ): Promise<{ resourceTemplates: ResourceTemplate[]; nextCursor?: string }>;
  read(uri: string, options: SourceCallOptions): Promise<ReadResourceResult>;
  listPrompts(cursor: string | undefined): Promise<{ prompts: Prompt[]; nextCursor?: string }>;
  getPrompt(
    name: string,
    args: Record<string, string> | undefined,
    options: SourceCallOptions,
  ): Promise<GetPromptResult>;
  complete(
    ref: { type: string; name?: string; uri?: string },
    argument: { name: string; value: string },
    context: { arguments?: Record<string, string> | undefined } | undefined,
    signal?: AbortSignal,
  ): Promise<CompleteResult>;
  /** The module that holds `uri` (a listed resource, or a template's match), for subscriptions. */
  ownerOf(uri: string): Promise<string | undefined>;
  /** Each URI's version token, by the module that holds it; URIs no module versions are left out. */
  versions(uris: readonly string[]): Promise<Map<string, string>>;
}

export function moduleContributions(source: ToolSource): ModuleContributions {
  const offering = async (verb: string): Promise<ModuleInfo[]> =>
    (await source.catalogue()).filter(
      (info) => info.status === "ok" && info.tools.some((tool) => tool.name === verb),
    );

  /** A seat verb's answer, or the module's error as a protocol error. */
  async function ask(module: string, verb: string, args: unknown, options: SourceCallOptions = {}) {
    const result = await source.call(`${module}.${verb}`, args, options);
    if (result.ok) return result.output as Record<string, unknown>;
    throw result.error;
  }

  async function listing(): Promise<Listing> {
    const modules = await offering(mcpSeat.resources);
    const answers = await Promise.all(
      modules.map(async (info) => {
        try {
          return { module: info.module, answer: await ask(info.module, mcpSeat.resources, {}) };
        } catch {
          return { module: info.module, answer: {} }; // a module that cannot list is left out
        }
      }),
    );
    return {
      resources: answers.flatMap(({ module, answer }) =>
        arrayOf<Resource>(answer.resources).map((resource) => ({ ...resource, module })),
      ),
      templates: answers.flatMap(({ module, answer }) =>
        arrayOf<ResourceTemplate>(answer.resourceTemplates).map((template) => ({ ...template, module })),
      ),
    };
  }

  async function ownerOf(uri: string): Promise<string | undefined> {
    return ownerIn(await listing(), uri);
  }

  async function promptModule(qualified: string): Promise<{ module: string; name: string }> {
    const dot = qualified.indexOf(".");
    const module = dot > 0 ? qualified.slice(0, dot) : "";
    const modules = await offering(mcpSeat.prompt);
    if (dot <= 0 || !modules.some((info) => info.module === module)) {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `Unknown prompt "${qualified}": prompts are named module.prompt (prompts/list lists them)`,
      );
    }
    return { module, name: qualified.slice(dot + 1) };
  }

  const seat: Seat = { offering, ask, listing, ownerOf, promptModule };
  return {
    listPrompts: (cursor) => listPrompts(seat, cursor),
    complete: (ref, argument, context, signal) => complete(seat, ref, argument, context, signal),
    versions: (uris) => versions(seat, uris),
    async listResources(cursor) {
      const { resources } = await listing();
      const page = pageOf(resources, cursor);
      return { resources: page.items.map(({ module: _module, ...resource }) => resource), ...page.next };
    },
    async listTemplates(cursor) {
      const { templates } = await listing();
      const page = pageOf(templates, cursor);
      return {
        resourceTemplates: page.items.map(({ module: _module, ...template }) => template),
        ...page.next,
      };
    },
    async read(uri, options) {
      const module = await ownerOf(uri);
      if (module === undefined) throw new ResourceNotFoundError(uri);
      try {
        const answer = await ask(module, mcpSeat.read, { uri }, options);
        return { contents: arrayOf(answer.contents) } as ReadResourceResult;
      } catch (error) {
        if ((error as { code?: unknown }).code === "not_found") throw new ResourceNotFoundError(uri);
        throw asProtocolError(error);
      }
    },
    async getPrompt(qualified, args, options) {
      const { module, name } = await promptModule(qualified);
      try {
        return (await ask(
          module,
          mcpSeat.prompt,
          { name, arguments: args ?? {} },
          options,
        )) as GetPromptResult;
      } catch (error) {
        throw asProtocolError(error);
      }
    },
    ownerOf,
  };
}

/** What the verbs below ask of the modules: who offers a seat verb, its answer, and the merged lists. */
interface Seat {
  offering(verb: string): Promise<ModuleInfo[]>;
  ask(
    module: string,
    verb: string,
    args: unknown,
    options?: SourceCallOptions,
  ): Promise<Record<string, unknown>>;
  listing(): Promise<Listing>;
  ownerOf(uri: string): Promise<string | undefined>;
  promptModule(qualified: string): Promise<{ module: string; name: string }>;
}

async function listPrompts(
  seat: Seat,
  cursor: string | undefined,
): ReturnType<ModuleContributions["listPrompts"]> {
  const modules = await seat.offering(mcpSeat.prompts);
  const prompts = (
    await Promise.all(
      modules.map(async (info) => {
        try {
          const answer = await seat.ask(info.module, mcpSeat.prompts, {});
          return arrayOf<Prompt>(answer.prompts).map((prompt) => ({
            ...prompt,
            name: `${info.module}.${prompt.name}`,
          }));
        } catch {
          return [];
        }
      }),
    )
  ).flat();
  const page = pageOf(prompts, cursor);
  return { prompts: page.items, ...page.next };
}

async function complete(
  seat: Seat,
  ...[ref, argument, context, signal]: Parameters<ModuleContributions["complete"]>
): ReturnType<ModuleContributions["complete"]> {
  let module: string | undefined;
  let forwarded = ref;
  if (ref.type === "ref/prompt" && typeof ref.name === "string") {
    const found = await seat.promptModule(ref.name);
    module = found.module;
    forwarded = { ...ref, name: found.name };
  } else if (ref.type === "ref/resource" && typeof ref.uri === "string") {
    const { templates } = await seat.listing();
    module = templates.find((template) => template.uriTemplate === ref.uri)?.module;
  }
  const none = { completion: { values: [], total: 0, hasMore: false } };
  if (module === undefined || !(await seat.offering(mcpSeat.complete)).some((info) => info.module === module))
    return none;
  try {
    const answer = await seat.ask(
      module,
      mcpSeat.complete,
      { ref: forwarded, argument, ...(context === undefined ? {} : { context }) },
      { timeoutMs: completionTimeoutMs, ...(signal === undefined ? {} : { signal }) },
    );
    const values = arrayOf<string>(answer.values).filter((value) => typeof value === "string");
    const total = typeof answer.total === "number" ? answer.total : values.length;
    return {
      completion: {
        values: values.slice(0, maxCompletions),
        total,
        hasMore: values.length > maxCompletions || answer.hasMore === true,
      },
    };
  } catch (error) {
    // Too slow to help a person typing: nothing now, and maybe more with the next keystroke.
    if ((error as { code?: unknown }).code === "timeout")
      return { completion: { values: [], hasMore: true } };
    throw asProtocolError(error);
  }
}

/** The module that holds `uri` in a listing: a listed resource's, else the first template's that matches. */
function ownerIn({ resources, templates }: Listing, uri: string): string | undefined {
  const listed = resources.find((resource) => resource.uri === uri);
  if (listed !== undefined) return listed.module;
  return templates.find((template) => new UriTemplate(template.uriTemplate).match(uri) !== null)?.module;
}

async function versions(seat: Seat, uris: readonly string[]): Promise<Map<string, string>> {
  const versioned = new Set((await seat.offering(mcpSeat.versions)).map((info) => info.module));
  // One listing for every URI of the look, not one per URI (ADR 0274).
  const listed = uris.length === 0 ? undefined : await seat.listing();
  const byModule = new Map<string, string[]>();
  for (const uri of uris) {
    const module = listed === undefined ? undefined : ownerIn(listed, uri);
    if (module === undefined || !versioned.has(module)) continue;
    const held = byModule.get(module);
    if (held === undefined) byModule.set(module, [uri]);
    else held.push(uri);
  }
  const found = new Map<string, string>();
  await Promise.all(
    [...byModule].map(async ([module, held]) => {
      try {
        const answer = await seat.ask(module, mcpSeat.versions, { uris: held });
        const versions = (answer.versions ?? {}) as Record<string, unknown>;
        for (const uri of held) {
          if (typeof versions[uri] === "string") found.set(uri, versions[uri] as string);
        }
      } catch {
        // A module that cannot answer now is asked again at the next look.
      }
    }),
  );
  return found;
}

function arrayOf<T>(value: unknown): T[] {
  return Array.isArray(value) ? (value as T[]) : [];
}

/** One page of a merged list; the cursor is the next item's offset (opaque to clients). */
function pageOf<T>(
  items: readonly T[],
  cursor: string | undefined,
): { items: T[]; next: { nextCursor?: string } } {
  let start = 0;
  if (cursor !== undefined) {
    start = Number.parseInt(Buffer.from(cursor, "base64url").toString("utf8"), 10);
    if (!Number.isSafeInteger(start) || start < 0 || start > items.length) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid cursor "${cursor.slice(0, 40)}"`);
    }
  }
  const end = start + pageSize;
  return {
    items: items.slice(start, end),
    next: end < items.length ? { nextCursor: Buffer.from(String(end)).toString("base64url") } : {},
  };
}

/** A module's coded error as the protocol error a client reads: bad input → invalid params. */
function asProtocolError(error: unknown): Error {
  if (error instanceof ProtocolError) return error;
  const code = (error as { code?: unknown }).code;
  const message = (error as { message?: unknown }).message;
  return new ProtocolError(
    code === "invalid_input" || code === "not_found"
      ? ProtocolErrorCode.InvalidParams
      : ProtocolErrorCode.InternalError,
    typeof message === "string" ? message : String(error),
    { code },
  );
}
