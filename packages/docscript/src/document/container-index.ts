import { type Container, isContainer, LoroList, LoroMap, LoroMovableList } from "loro-crdt";

/**
 * Which row each Loro container belongs to, so a change's ops name their rows without asking Loro for
 * paths (slow on a fresh fork). A container never moves, so the index only grows; an entry whose row
 * was deleted still names the right row.
 */
export type ContainerIndex = Map<string, { readonly root: string; readonly rowId: string }>;

/** Containers deeper than this below a row are not recorded (the push check refuses deeper ones). */
const maxIndexedDepth = 64;

/**
 * Records `container` and every container under it as belonging to `row`, walking Loro's handles
 * (never a value: a plain value shaped like `getDeepValueWithID`'s `{ cid, value }` is no container).
 * Maps and lists are walked; a container of another kind is recorded without its children, which the
 * index then finds by their parents when an op names them.
 */
export function indexContainers(
  container: Container,
  index: ContainerIndex,
  row: { root: string; rowId: string },
  depth = 0,
): void {
  index.set(container.id, row);
  if (depth >= maxIndexedDepth) return;
  const children =
    container instanceof LoroMap
      ? container.values()
      : container instanceof LoroList || container instanceof LoroMovableList
        ? container.toArray()
        : [];
  for (const child of children) {
    if (!isContainer(child)) continue;
    indexContainers(child, index, row, depth + 1);
    child.free();
  }
}
