/**
 * Keeps the `count` items first in `compare`'s order at the front of `items` and drops the rest, in no
 * particular order: a selection (Hoare's), linear on average, so a page of a million items is not a sort
 * of them all. `compare` must order items strictly (no two equal).
 */
export function keepFirst<Item>(
  items: Item[],
  count: number,
  compare: (left: Item, right: Item) => number,
): void {
  if (items.length <= count) return;
  const at = (index: number) => items[index] as Item;
  const target = count - 1;
  let low = 0;
  let high = items.length - 1;
  while (low < high) {
    const pivot = at((low + high) >>> 1);
    let left = low;
    let right = high;
    while (left <= right) {
      while (compare(at(left), pivot) < 0) left++;
      while (compare(at(right), pivot) > 0) right--;
      if (left <= right) {
        [items[left], items[right]] = [at(right), at(left)];
        left++;
        right--;
      }
    }
    if (target <= right) high = right;
    else if (target >= left) low = left;
    else break;
  }
  items.length = count;
}
