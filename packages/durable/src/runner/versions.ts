/** Graph versions: whether this code may drive a run started on another version of its graph. */
import { DurableError } from "../errors/durable-error.ts";
import type { Graph } from "../graph/create-graph.ts";
import type { JournalRecord, RunRecord } from "../store/durable-store.ts";

/**
 * Throws `journal_mismatch` when the run started on a version this graph neither is nor declares
 * compatible, naming the node and the last step the run recorded in it: the code it would replay is not
 * the code that recorded it.
 */
export function checkVersion(
  // biome-ignore lint/suspicious/noExplicitAny: graphs of any state shape
  graph: Graph<any>,
  run: RunRecord,
  runVersion: number,
  node: string,
  visit: number,
  journal: ReadonlyMap<string, JournalRecord>,
): void {
  if (runVersion === graph.version || graph.compatibleWith.includes(runVersion)) return;
  const prefix = `${node}#${visit}/`;
  const position = (key: string) => Number(key.slice(prefix.length).split(/[/@]/)[0]);
  const recorded = [...journal.values()]
    .filter((record) => record.key.startsWith(prefix) && !record.key.includes("@"))
    .sort((a, b) => position(a.key) - position(b.key));
  const last = recorded.at(-1);
  const where = `node "${node}"${last === undefined ? "" : `, step "${last.name}" (${last.key})`}`;
  const accepted = [graph.version, ...graph.compatibleWith].join(", ");
  throw new DurableError(
    "journal_mismatch",
    `Run ${run.runId} started on version ${runVersion} of graph "${graph.name}"; this code is version ${graph.version} and resumes runs of versions ${accepted} only. The run stands at ${where}. Resume it with version ${runVersion}'s code, or add ${runVersion} to compatibleWith once this code replays it the same way`,
    {
      data: {
        graph: graph.name,
        runVersion,
        graphVersion: graph.version,
        compatibleWith: graph.compatibleWith,
        node,
        step: last?.name ?? null,
        key: last?.key ?? null,
      },
    },
  );
}
