/**
 * One flood against one configuration of its service, in a process of its own so that its memory is
 * its own: `flood-child.ts <flood> <bounded|unbounded> <scale> <directory>` prints `RESULT <row JSON>`.
 * Run by `floods.ts`.
 */
import { base64AnswerFlood } from "./core-floods.ts";
import { pushesFlood, unreadFlood } from "./docscript-floods.ts";
import { historyFlood, stateFlood, streamsFlood } from "./durable-floods.ts";
import type { FloodRow, Variant } from "./measure.ts";
import { coreBlocksFlood, queuedJobsFlood } from "./memory-floods.ts";

/** Every flood by the name `--only` takes, in the order the table shows them. */
export const floods: Record<
  string,
  (variant: Variant, scale: number, directory: string) => Promise<FloodRow>
> = {
  "durable-state": stateFlood,
  "durable-history": historyFlood,
  "durable-streams": streamsFlood,
  "docscript-unread": unreadFlood,
  "docscript-pushes": pushesFlood,
  "memory-blocks": coreBlocksFlood,
  "memory-imports": queuedJobsFlood,
  "core-base64": (variant, scale) => base64AnswerFlood(variant, scale),
};

if (process.argv[1]?.endsWith("flood-child.ts") === true) {
  const [name, variant, scale, directory] = process.argv.slice(2);
  const flood = floods[name ?? ""];
  if (flood === undefined || (variant !== "bounded" && variant !== "unbounded") || directory === undefined)
    throw new Error(
      `usage: flood-child.ts <${Object.keys(floods).join("|")}> <bounded|unbounded> <scale> <directory>`,
    );
  const row = await flood(variant, Number(scale), directory);
  process.stdout.write(`RESULT ${JSON.stringify(row)}\n`);
  // Pooled connections and the services' timers would keep the process a while: the row is out.
  process.exit(0);
}
