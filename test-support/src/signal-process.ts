/** Sends a child a signal; for `SIGSTOP`, resolves once the kernel reports it stopped (Linux `/proc`). */
import type { ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";

export async function signalProcess(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  child.kill(signal);
  if (signal !== "SIGSTOP" || child.pid === undefined) return;
  // A loaded machine delivers the signal late: until then the process still reads and forwards.
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    let state: string | undefined;
    try {
      // Field 3 of /proc/<pid>/stat, after the parenthesised command name.
      state = readFileSync(`/proc/${child.pid}/stat`, "utf8").split(") ")[1]?.[0];
    } catch {
      return; // no /proc: the signal was sent, which is all that can be known
    }
    if (state === "T" || state === "t") return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`process ${child.pid} did not stop within 5 s of SIGSTOP`);
}
