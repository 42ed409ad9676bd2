/**
 * `tackle mcp --print-config`: the entries common MCP clients need to start `tackle mcp` (Claude
 * Desktop, Cursor, VS Code, Claude Code, MCP Inspector) and to reach a running console over HTTP.
 * Absolute paths throughout: a desktop client starts its servers with neither this shell's PATH nor
 * its working folder. The console's token is never printed, only the file that holds it.
 */
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { consoleTokenPath, tackleHome } from "../config/tackle-home.ts";

/** The variables that decide what `tackle mcp` serves, copied into the entries when set here. */
const passedVariables = [
  "MESH_BROKER_URL",
  "MESH_BROKER_FILE",
  "MESH_TOOL_MODULES",
  "MESH_NODE",
  "MESH_CONSOLE_LISTEN",
] as const;

export interface McpClientConfigOptions {
  readonly env: NodeJS.ProcessEnv;
  /** `tackle mcp`'s own flags to pass on (`--console`, `--builtin`, …). */
  readonly flags: readonly string[];
  /** The Node that runs it (default this process's). */
  readonly node?: string;
}

/** The launcher beside this file's package (bin/tackle.js), whether this runs from src or dist. */
function tackleBin(): string {
  return realpathSync(fileURLToPath(new URL("../../bin/tackle.js", import.meta.url)));
}

export function mcpClientConfig(options: McpClientConfigOptions): string {
  const command = options.node ?? process.execPath;
  const args = [tackleBin(), "mcp", ...options.flags];
  const env: Record<string, string> = { TACKLE_HOME: tackleHome(options.env) };
  for (const name of passedVariables) {
    const value = options.env[name];
    if (value !== undefined && value !== "") env[name] = value;
  }
  const stdio = { command, args, env };
  const json = (value: unknown) => JSON.stringify(value, null, 2);
  const quoted = (word: string) =>
    /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
  const listen = options.env.MESH_CONSOLE_LISTEN || "127.0.0.1:4270";
  const tokenFile = consoleTokenPath(options.env);
  return [
    "# Claude Desktop (claude_desktop_config.json), Cursor (~/.cursor/mcp.json), Windsurf and most others:",
    json({ mcpServers: { tackle: stdio } }),
    "",
    "# VS Code (.vscode/mcp.json):",
    json({ servers: { tackle: { type: "stdio", ...stdio } } }),
    "",
    "# Claude Code:",
    [
      "claude mcp add tackle",
      ...Object.entries(env).map(([name, value]) => `-e ${quoted(`${name}=${value}`)}`),
      "--",
      quoted(command),
      ...args.map(quoted),
    ].join(" "),
    "",
    "# MCP Inspector over stdio:",
    [
      "npx @modelcontextprotocol/inspector",
      ...Object.entries(env).map(([name, value]) => `-e ${quoted(`${name}=${value}`)}`),
      quoted(command),
      ...args.map(quoted),
    ].join(" "),
    "",
    `# Over HTTP, a running console (tackle serve): the token is the contents of ${tokenFile}`,
    json({
      mcpServers: {
        tackle: {
          type: "http",
          url: `http://${listen}/mcp`,
          headers: { Authorization: `Bearer <contents of ${tokenFile}>` },
        },
      },
    }),
    "",
  ].join("\n");
}
