/**
 * `tackle mcp --print-config`: the printed entries start a working `tackle mcp` as a desktop client
 * would (absolute command and arguments, the printed environment, another working folder), and the
 * HTTP entry names the token file without printing the token.
 */
import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { cleanEnv, runTackle, tempHome } from "./tackle-process.ts";

const whoami = fileURLToPath(new URL("./fixtures/whoami-bundle.ts", import.meta.url));
const home = tempHome();
after(() => home.remove());

interface StdioEntry {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** The printed blocks: each a `# title` line and what follows it. */
function blocks(text: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const block of text.trim().split(/\n\n/)) {
    const [title = "", ...rest] = block.split("\n");
    found.set(title, rest.join("\n"));
  }
  return found;
}

test("the printed entries start tackle mcp from any folder, serving what this shell's settings serve, and name the token file", async () => {
  const printed = await runTackle(["mcp", "--print-config", "--builtin"], {
    env: cleanEnv({ TACKLE_HOME: home.path, MESH_TOOL_MODULES: `who=${whoami}` }),
  });
  assert.equal(printed.code, 0, printed.stderr);
  const found = blocks(printed.stdout);
  const desktop = [...found].find(([title]) => title.startsWith("# Claude Desktop"))?.[1];
  assert.ok(desktop, printed.stdout);
  const entry = (JSON.parse(desktop) as { mcpServers: { tackle: StdioEntry } }).mcpServers.tackle;
  assert.ok(entry.command.startsWith("/"), entry.command);
  assert.ok(entry.args[0]?.startsWith("/"), entry.args[0]);
  assert.deepEqual(entry.args.slice(1), ["mcp", "--builtin"]);
  assert.deepEqual(entry.env, { TACKLE_HOME: home.path, MESH_TOOL_MODULES: `who=${whoami}` });
  const vscode = [...found].find(([title]) => title.startsWith("# VS Code"))?.[1] ?? "{}";
  assert.deepEqual((JSON.parse(vscode) as { servers: { tackle: unknown } }).servers.tackle, {
    type: "stdio",
    ...entry,
  });
  assert.match(printed.stdout, /^claude mcp add tackle -e TACKLE_HOME=\S+ -e MESH_TOOL_MODULES=\S+ -- \//m);
  assert.match(printed.stdout, /^npx @modelcontextprotocol\/inspector -e TACKLE_HOME=/m);
  const http = [...found].find(([title]) => title.startsWith("# Over HTTP"));
  assert.ok(http?.[0].includes(`${home.path}/console-token`), http?.[0]);
  const httpEntry = JSON.parse(http?.[1] ?? "{}") as {
    mcpServers: { tackle: { url: string; headers: { Authorization: string } } };
  };
  assert.equal(httpEntry.mcpServers.tackle.url, "http://127.0.0.1:4270/mcp");
  assert.equal(
    httpEntry.mcpServers.tackle.headers.Authorization,
    `Bearer <contents of ${home.path}/console-token>`,
  );

  // Started as a desktop client starts it: the entry's command, arguments and environment, elsewhere.
  const client = new Client({ name: "print-config", version: "1.0.0" });
  await client.connect(
    new StdioClientTransport({ ...entry, env: { ...entry.env, TACKLE_LOG_LEVEL: "silent" }, cwd: tmpdir() }),
  );
  try {
    const names = (await client.listTools()).tools.map((tool) => tool.name);
    assert.ok(names.includes("who.whoami"), names.join(", "));
    assert.ok(names.includes("demo.add"), names.join(", "));
  } finally {
    await client.close();
  }
});
