/**
 * The history of a snapshot a document is created from, checked by the rules a push's changes pass
 * (ADR 0553) without exporting it as JSON (ADR 0554). `exportJsonInIdSpan` builds a JavaScript object
 * for every op, value and all: 4.9–6.3 s for a 5 MB history at load 8 (34 s at load 14), most of the
 * create. Here the containers the ops changed come from Loro's own list (`getChangedContainersIn`),
 * and the ops are read change by change in Loro's own form (`getOpsInChange`) for their map keys and
 * the containers their map writes made (their parents: asking Loro's handles for each was half of the
 * check, 1.3 s of 2.6 at 5 MB), in slices of at most `sliceMs` between which the event loop runs (a
 * change's ops are read at once, however many).
 */
import type { LoroDoc } from "loro-crdt";
import { parentIdOf } from "./changed-rows.ts";
import { maxContainerDepth } from "./push-checks.ts";
import { foreignRootReasons } from "./push-staging.ts";

/** The longest the check holds the event loop at once (a slice ends after the change past it). */
export const sliceMs = 20;

/** Lets the event loop run (its timers, sockets and other requests) before the work goes on. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A pause that yields only once `sliceMs` has passed since the last. */
export function slicer(): () => Promise<void> | undefined {
  let since = performance.now();
  return () => {
    if (performance.now() - since < sliceMs) return undefined;
    return yieldToEventLoop().then(() => {
      since = performance.now();
    });
  };
}

/** Ops per `getChangedContainersIn` call (`historyReasons`' default; the bench of ADR 0560 asks all). */
const opsPerChangedRead = 5_000;

/** Where a container sits: its depth below its root (a root is 0) and that root's id. */
interface Place {
  readonly depth: number;
  readonly root: string;
}

const rootId = /^cid:root-(.+):(\w+)$/;
/** The roots the mapping knows: `entities` and `relations` (maps) and `meta` (any kind). */
const rowRoots = new Set(["entities", "relations"]);
const metaRoot = "meta";

/**
 * What the history of `doc` writes that a push may not, in the push check's words (`unreadableKeys`
 * and the foreign roots `rowsOfSpans` finds):
 *
 * - a container nested more than `maxContainerDepth` below its root (the only reason then given);
 * - a map key `__proto__`, though deleted since (every map op of every change is read);
 * - a root the mapping does not know, and an `entities` or `relations` root that is not a map: the
 *   containers changed hold every container an op wrote into, an emptied root's and a deleted row's too.
 */
export async function historyReasons(doc: LoroDoc, opsPerRead = opsPerChangedRead): Promise<string[]> {
  const pause = slicer();
  const changed = new Set<string>();
  for (const span of doc.findIdSpansBetween([], doc.frontiers()).forward) {
    // A span's ops a part at a time (ADR 0560: a 5 MB history's one span at once held the loop 0.25–0.8 s).
    for (let start = 0; start < span.length; start += opsPerRead) {
      const length = Math.min(opsPerRead, span.length - start);
      for (const id of doc.getChangedContainersIn({ peer: span.peer, counter: span.counter + start }, length))
        changed.add(id);
      await pause();
    }
  }
  const { protoMaps, parents } = await readOps(doc, pause);
  // Parents as the ops made them; a container made otherwise (in a list, a tree) as Loro links it.
  const parentOf = (id: string) => parents.get(id) ?? parentIdOf(doc, id);
  const places = new Map<string, Place>();
  for (const id of changed) {
    if (placeOf(id, parentOf, places).depth > maxContainerDepth)
      return [`the update nests containers more than ${maxContainerDepth} levels deep`];
    await pause();
  }
  const foreign = new Set<string>();
  for (const id of changed) {
    const root = rootId.exec((places.get(id) as Place).root);
    // A container with no root above it (none such in a whole snapshot) changes nothing a reader sees.
    if (root === null) continue;
    const [, name = "", kind] = root;
    if (rowRoots.has(name) && kind !== "Map") foreign.add(`${name} (written as something other than a map)`);
    else if (!rowRoots.has(name) && name !== metaRoot) foreign.add(name);
  }
  return [
    ...protoMaps.map((id) => `the update writes a key "__proto__" into ${id}`),
    ...foreignRootReasons(foreign),
  ];
}

/** An op as `getOpsInChange` answers it: its counter, container (by name or id) and content by kind. */
interface RawOp {
  readonly counter: number;
  readonly container: {
    readonly Root?: { readonly name: string; readonly container_type: string };
    readonly Normal?: {
      readonly peer: number | bigint | string;
      readonly counter: number;
      readonly container_type: string;
    };
  };
  readonly content: { readonly Map?: { readonly key?: unknown; readonly value?: unknown } };
}

/** What the ops say: the maps a key `__proto__` was written into, and each map-made container's parent. */
interface OpsRead {
  readonly protoMaps: readonly string[];
  readonly parents: ReadonlyMap<string, string>;
}

const containerValue = /^🦜:(cid:(\d+)@(\d+):\w+)$/;

/**
 * Every op of `doc`'s history, change by change: the maps (by id, in history order) a key `__proto__`
 * was written into, and the parent of each container a map op made. A container's id is the id of the
 * op that made it, so only the op of that id is taken for it (a plain string shaped like a container
 * id, written elsewhere, is not).
 */
async function readOps(doc: LoroDoc, pause: () => Promise<void> | undefined): Promise<OpsRead> {
  const protoMaps = new Set<string>();
  const parents = new Map<string, string>();
  for (const [peer, end] of doc.oplogVersion().toJSON()) {
    let counter = 0;
    while (counter < end) {
      const length = doc.getChangeAt({ peer, counter }).length;
      for (const op of doc.getOpsInChange({ peer, counter }) as RawOp[]) {
        const map = op.content.Map;
        if (map === undefined) continue;
        if (map.key === "__proto__") protoMaps.add(containerIdOf(op.container));
        const made = typeof map.value === "string" ? containerValue.exec(map.value) : null;
        if (made !== null && made[3] === peer && Number(made[2]) === op.counter)
          parents.set(made[1] as string, containerIdOf(op.container));
      }
      counter += Math.max(1, length);
      await pause();
    }
  }
  return { protoMaps: [...protoMaps], parents };
}

function containerIdOf(container: RawOp["container"]): string {
  if (container.Root !== undefined) return `cid:root-${container.Root.name}:${container.Root.container_type}`;
  const normal = container.Normal;
  return `cid:${normal?.counter}@${normal?.peer}:${normal?.container_type}`;
}

/**
 * A container's place, walking its parents up to a root or a container already placed; past
 * `maxContainerDepth` it stops and answers one more than the bound. Linear in the containers.
 */
function placeOf(
  id: string,
  parentOf: (id: string) => string | undefined,
  places: Map<string, Place>,
): Place {
  const chain: string[] = [];
  let above: Place | undefined;
  let current: string | undefined = id;
  while (current !== undefined) {
    above = places.get(current);
    if (above !== undefined) break;
    chain.push(current);
    if (chain.length > maxContainerDepth + 1) return { depth: maxContainerDepth + 1, root: "" };
    current = parentOf(current);
  }
  // chain[0] is `id`; the last is the root (nothing above) or sits below a placed container.
  const root = above?.root ?? (chain[chain.length - 1] as string);
  for (let index = chain.length - 1, depth = (above?.depth ?? -1) + 1; index >= 0; index--, depth++)
    places.set(chain[index] as string, { depth, root });
  return places.get(id) as Place;
}
