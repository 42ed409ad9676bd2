/** What every command reads and writes instead of the globals, so tests can run the program in process. */
import type { Logger } from "@tackle/core";

export interface ProgramContext {
  readonly env: NodeJS.ProcessEnv;
  readonly stdin: NodeJS.ReadStream;
  readonly stdout: NodeJS.WriteStream;
  readonly stderr: NodeJS.WriteStream;
  readonly logger: Logger;
  /** Resolves when the process is asked to stop (SIGINT, SIGTERM); long-running commands wait on it. */
  readonly stopped: Promise<string>;
}
