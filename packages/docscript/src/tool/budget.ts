/**
 * Token budgets for what a model reads back from the tool, counted with a real tokenizer (`o200k_base`,
 * through `@tackle/core/tokens`, which loads it on the first count). Past a budget an answer is cut at
 * an item boundary and says so: counts of what was left out and, where there is more to read, a
 * cursor. Nothing is ever cut silently.
 */
import { tokensOf } from "@tackle/core/tokens";

export { tokensOf };

/** Default budgets in tokens, one per answer a model reads. */
export const defaultBudgets = {
  /** One `snapshot` page. */
  snapshot: 4_000,
  /** A `run-edit-script` answer without its logs (preview, plan id, commit outcome). */
  run: 2_000,
  /** The script's console lines. */
  logs: 1_000,
  /** A `commit-plan` answer, or any failure (its issues and reasons). */
  commit: 2_000,
} as const;

export type Budgets = { readonly [Key in keyof typeof defaultBudgets]: number };

/**
 * The longest prefix of `items` for which `build(prefix)` fits `budget` tokens (at least nothing:
 * `build([])` is returned even when it alone does not fit). Per-item counts guide the first guess; the
 * answer is always counted whole.
 */
export function fitPrefix<Item, Answer>(
  items: readonly Item[],
  budget: number,
  build: (prefix: readonly Item[]) => Answer,
): { answer: Answer; taken: number } {
  const whole = build(items);
  if (tokensOf(whole) <= budget) return { answer: whole, taken: items.length };
  const fixed = tokensOf(build([]));
  let used = fixed;
  let guess = 0;
  for (const item of items) {
    const cost = tokensOf(item) + 1;
    if (used + cost > budget) break;
    used += cost;
    guess++;
  }
  let answer = build(items.slice(0, guess));
  while (guess > 0 && tokensOf(answer) > budget) {
    guess = Math.max(0, guess - Math.max(1, Math.ceil(guess / 20)));
    answer = build(items.slice(0, guess));
  }
  return { answer, taken: guess };
}
