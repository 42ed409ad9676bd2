/** Where Tackle keeps per-user state: `$TACKLE_HOME`, else `~/.tackle`. */
import { homedir } from "node:os";
import { join } from "node:path";

export function tackleHome(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env.TACKLE_HOME;
  return configured !== undefined && configured !== "" ? configured : join(homedir(), ".tackle");
}

/** The console's bearer token file. */
export function consoleTokenPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(tackleHome(env), "console-token");
}
