/**
 * The answer budget where models read served tools, with real MCP clients: the console over HTTP (a
 * 2025 session, a second session, a session-less 2026-07-28 client) and `tackle mcp` over stdio. A
 * long answer comes cut within the budget (counted here with the tokenizer itself), says what was left
 * out, and pages by cursor through every remaining part once, in order; a short one comes unchanged; a
 * cursor reads from any session of the credential that got it (another credential's refusal:
 * result-cursor-credential.test.ts).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { type CallToolResult, Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createToolSet, isToolContent, silentLogger } from "@tackle/core";
import { toCallToolResult } from "@tackle/core/mcp";
import { freePort, startNatsServer, underLoadMs } from "@tackle/test-support";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { readConsoleToken } from "../src/console/console-token.ts";
import { type RunningConsole, startConsole } from "../src/console/start-console.ts";
import { createConsoleToolSource } from "../src/tool-source/create-console-tool-source.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";
import { largeResultTools, largeValue, longText, pictureData } from "./fixtures/large-results-bundle.ts";
import { cleanEnv, mainScript, startServe, tempHome } from "./tackle-process.ts";

const token = "test-token-result-budget-0123";
const pageTool = "tackle.result_page";
/** What an image counts against the budget (its base64 is never tokenized). */
const imageTokens = 1_000;

/** The tokens a model reads in an answer. */
function tokensRead(result: CallToolResult): number {
  let total = 0;
  for (const block of result.content) total += block.type === "text" ? countTokens(block.text) : imageTokens;
  return total;
}

function summaryOf(result: CallToolResult): string {
  const last = result.content.at(-1);
  assert.equal(last?.type, "text");
  return (last as { text: string }).text;
}

function cursorOf(result: CallToolResult): string | undefined {
  const cursor = (result._meta?.["tackle/resultPage"] as { cursor?: string } | undefined)?.cursor;
  // The model reads the cursor in the summary; the `_meta` copy is for programs.
  if (cursor !== undefined) assert.ok(summaryOf(result).includes(`${pageTool} {"cursor":"${cursor}"}`));
  return cursor;
}

async function call(client: Client, name: string, args: Record<string, unknown>) {
  return (await client.callTool(
    { name, arguments: args },
    { timeout: underLoadMs(60_000) },
  )) as CallToolResult;
}

/** The first answer and every part after it, by cursor; each within `budget`. */
async function readAll(client: Client, first: CallToolResult, budget: number): Promise<CallToolResult[]> {
  const parts = [first];
  let cursor = cursorOf(first);
  while (cursor !== undefined) {
    const next = await call(client, pageTool, { cursor });
    assert.notEqual(next.isError, true, JSON.stringify(next.content).slice(0, 300));
    parts.push(next);
    cursor = cursorOf(next);
  }
  for (const part of parts) {
    assert.ok(tokensRead(part) <= budget, `a part of ${tokensRead(part)} tokens, over ${budget}`);
  }
  assert.match(summaryOf(parts.at(-1) as CallToolResult), /This is the last part/);
  return parts;
}

/** The text of every part, summaries left out, joined: the pieces of one text block follow each other. */
function joined(parts: readonly CallToolResult[]): string {
  return parts
    .flatMap((part) => part.content.slice(0, -1).map((block) => (block.type === "text" ? block.text : "")))
    .join("");
}

async function assertLongTextPages(client: Client, budget: number, lines: number, tool = "large.text") {
  const text = longText(lines);
  const first = await call(client, tool, { lines });
  assert.notEqual(first.isError, true);
  const summary = summaryOf(first);
  assert.match(summary, new RegExp(`Answer cut to fit the budget of ${budget} tokens`));
  // Past 100,000 characters the total is estimated from a sample (ADR 0555).
  const total = new RegExp(`1 item, ${text.length} characters of text, about (\\d+) tokens`).exec(summary);
  assert.ok(total !== null, summary);
  const exact = countTokens(text);
  assert.ok(Math.abs(Number(total[1]) - exact) / exact < 0.02, `${total[1]} tokens said, ${exact} counted`);
  assert.match(summary, /Left out: the rest of item 1 \(\d+ characters of text\)/);
  const parts = await readAll(client, first, budget);
  assert.ok(parts.length >= Math.floor(countTokens(text) / budget), `${parts.length} parts`);
  assert.equal(joined(parts), text, "the parts are the text, each piece once and in order");
  for (const part of parts.slice(0, -1)) {
    assert.ok((part.content[0] as { text: string }).text.endsWith("\n"), "a part ends mid-line");
  }
}

async function assertJsonPages(client: Client, budget: number, count: number, tool = "large.json") {
  const value = largeValue(count);
  const first = await call(client, tool, { count });
  assert.equal(first.structuredContent, undefined, "a cut answer carries no partial structured content");
  const parts = await readAll(client, first, budget);
  for (const part of parts.slice(0, -1)) {
    assert.match((part.content[0] as { text: string }).text, /\},$/, "a part ends after a whole record");
  }
  assert.deepEqual(JSON.parse(joined(parts)), value);
}

// The console of the first block below, started and closed by its hooks; its tests' clients close with it.
let running: RunningConsole;
const budget = 8_000;
const clients: Client[] = [];

async function connect(mode: "legacy" | { pin: "2026-07-28" }): Promise<Client> {
  const client = new Client({ name: "budget-test", version: "1.0.0" }, { versionNegotiation: { mode } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(running.url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  clients.push(client);
  return client;
}

describe("the console over HTTP", () => {
  before(async () => {
    const source = createEmbeddedToolSource([
      { module: "large", toolset: createToolSet(largeResultTools()), errors: [], close: () => {} },
    ]);
    running = await startConsole({
      source,
      listen: { host: "127.0.0.1", port: 0 },
      token,
      logger: silentLogger,
    });
  });
  after(async () => {
    for (const client of clients) await client.close();
    await running.close();
  });

  test("lists the paging tool beside tackle.modules", async () => {
    const { tools } = await (await connect("legacy")).listTools();
    const paging = tools.find((tool) => tool.name === pageTool);
    assert.ok(paging, tools.map((tool) => tool.name).join(", "));
    assert.deepEqual(paging.inputSchema.required, ["cursor"]);
  });

  for (const [label, mode] of [
    ["a 2025 session", "legacy"],
    ["a session-less 2026-07-28 client", { pin: "2026-07-28" }],
  ] as const) {
    test(`${label}: 2 MB of text comes in parts within the budget, every part once and in order`, async () => {
      await assertLongTextPages(await connect(mode), budget, 34_000);
    });

    test(`${label}: a large JSON result comes in parts cut after whole records`, async () => {
      await assertJsonPages(await connect(mode), budget, 8_000);
    });
  }

  test("an answer within the budget comes unchanged: the same text and structured content", async () => {
    const client = await connect("legacy");
    const lines = 400; // about 5,600 tokens
    assert.ok(countTokens(longText(lines)) < budget);
    const whole = await call(client, "large.text", { lines });
    assert.deepEqual(whole.content, [{ type: "text", text: longText(lines) }]);
    assert.equal(whole._meta?.["tackle/resultPage"], undefined);
    const small = await call(client, "large.json", { count: 3 });
    const expected = toCallToolResult({ ok: true, output: largeValue(3) });
    assert.deepEqual(small.content, expected.content);
    assert.equal((small.content[0] as { text: string }).text, JSON.stringify(largeValue(3)));
    assert.deepEqual(small.structuredContent, largeValue(3));
  });

  test("images count a fixed cost, are never cut, and come whole across the parts", async () => {
    const client = await connect("legacy");
    const first = await call(client, "large.pictures", { count: 12 });
    const parts = await readAll(client, first, budget);
    const images = parts.flatMap((part) => part.content.filter((block) => block.type === "image"));
    assert.equal(images.length, 12);
    for (const image of images) assert.equal((image as { data: string }).data, pictureData);
    assert.equal(parts.length, 2, "7 images and the caption fit the first part, 5 the second");
  });

  wholeAnswerTests();
});

/** The whole answer for a client that sizes itself, and cursors that outlive a session. */
function wholeAnswerTests(): void {
  test("the console tool source (tackle call and tackle mcp --console) gets the whole result, to size itself", async () => {
    const consoleSource = await createConsoleToolSource({ url: running.url, token });
    try {
      const result = await consoleSource.call("large.text", { lines: 34_000 });
      assert.ok(result.ok);
      // The console source reads a text answer back as the text block it was; the whole of it, not a part.
      assert.ok(isToolContent(result.output));
      const blocks = result.output.content;
      assert.equal(blocks.length, 1);
      const text = blocks[0]?.type === "text" ? blocks[0].text : "";
      assert.ok(text === longText(34_000), `${text.length} characters`);
    } finally {
      await consoleSource.close();
    }
  });

  test("tackle mcp --console budgets the console's whole answer itself, with cursors its own paging tool reads", async () => {
    const client = new Client(
      { name: "budget-via-console", version: "1.0.0" },
      { versionNegotiation: { mode: "legacy" } },
    );
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [
          "--conditions=@tackle/source",
          mainScript,
          "mcp",
          "--console",
          running.url,
          "--result-budget",
          "2000",
        ],
        env: cleanEnv({ TACKLE_CONSOLE_TOKEN: token, TACKLE_LOG_LEVEL: "silent" }) as Record<string, string>,
        stderr: "pipe",
      }),
    );
    clients.push(client);
    const first = await call(client, "large.text", { lines: 3_000 });
    assert.match(summaryOf(first), /Answer cut to fit the budget of 2000 tokens/);
    const parts = await readAll(client, first, 2_000);
    // Through the console source a text answer stays the text block it was, as `tackle mcp` sends it itself.
    assert.equal(joined(parts), longText(3_000));
  });

  test("a cursor belongs to the credential, not the session: a one-shot client (a new session per call, closed after it) reads every part", async () => {
    const oneShot = async <T>(
      mode: "legacy" | { pin: "2026-07-28" },
      work: (client: Client) => Promise<T>,
    ) => {
      const client = await connect(mode);
      try {
        return await work(client);
      } finally {
        await client.close();
        clients.splice(clients.indexOf(client), 1);
      }
    };
    const parts = [await oneShot("legacy", (client) => call(client, "large.text", { lines: 6_000 }))];
    let cursor = cursorOf(parts[0] as CallToolResult);
    // Each part read by a fresh client, alternating a 2025 session and a session-less 2026-07-28 call.
    while (cursor !== undefined) {
      const mode = parts.length % 2 === 1 ? ({ pin: "2026-07-28" } as const) : "legacy";
      const next = await oneShot(mode, (client) => call(client, pageTool, { cursor }));
      assert.notEqual(next.isError, true, JSON.stringify(next.content).slice(0, 300));
      parts.push(next);
      cursor = cursorOf(next);
    }
    assert.ok(parts.length >= 3, `${parts.length} parts`);
    assert.equal(joined(parts), longText(6_000));
  });
}

describe("tackle mcp over stdio", () => {
  const bundle = fileURLToPath(new URL("./fixtures/large-results-bundle.ts", import.meta.url));

  async function connect(budget?: number): Promise<Client> {
    const client = new Client(
      { name: "budget-stdio", version: "1.0.0" },
      { versionNegotiation: { mode: "legacy" } },
    );
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [
          "--conditions=@tackle/source",
          mainScript,
          "mcp",
          ...(budget === undefined ? [] : ["--result-budget", String(budget)]),
        ],
        env: cleanEnv({ MESH_TOOL_MODULES: `large=${bundle}`, TACKLE_LOG_LEVEL: "silent" }) as Record<
          string,
          string
        >,
        stderr: "pipe",
      }),
    );
    return client;
  }

  test("the default budget: 2 MB of text and a large JSON result page within 8,000 tokens", async () => {
    const client = await connect();
    try {
      await assertLongTextPages(client, 8_000, 34_000);
      await assertJsonPages(client, 8_000, 8_000);
      const small = await call(client, "large.json", { count: 2 });
      assert.equal((small.content[0] as { text: string }).text, JSON.stringify(largeValue(2)));
    } finally {
      await client.close();
    }
  });

  test("--result-budget sets the budget", async () => {
    const client = await connect(2_000);
    try {
      await assertLongTextPages(client, 2_000, 3_000);
    } finally {
      await client.close();
    }
  });
});

describe("a mesh node's stdio child (Python) through the console", () => {
  test("its long text and its JSON come in parts within the budget", async () => {
    const nats = await startNatsServer();
    const home = tempHome();
    const python = fileURLToPath(new URL("./fixtures/long_answers.py", import.meta.url));
    const node = await startServe(
      [],
      cleanEnv({
        MESH_BROKER_URL: nats.url,
        TACKLE_HOME: home.path,
        MESH_NODE: "py-node",
        MESH_TOOL_MODULES: `py=${python}`,
        MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}`,
      }),
    );
    const client = new Client(
      { name: "budget-mesh", version: "1.0.0" },
      { versionNegotiation: { mode: "legacy" } },
    );
    try {
      await client.connect(
        new StreamableHTTPClientTransport(new URL(node.url), {
          requestInit: { headers: { authorization: `Bearer ${readConsoleToken(node.tokenFile ?? "")}` } },
        }),
      );
      // Under the broker's 1 MB max_payload, as every mesh answer is.
      await assertLongTextPages(client, 8_000, 12_000, "py.lines");
      await assertJsonPages(client, 8_000, 3_000, "py.records");
    } finally {
      await client.close();
      await node.stop();
      await nats.close();
      home.remove();
    }
  });
});
