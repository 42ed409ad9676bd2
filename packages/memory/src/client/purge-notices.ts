/**
 * Purges seen in this process: a `MemoryClient` that purged a scope says so here, and the
 * middlewares' bundle caches drop what they hold of that scope at once (a cache in another process
 * serves its entry until its TTL, 60 s by default; ADR 0365).
 */
import type { MemoryScope } from "../scope/memory-scope.ts";

interface Subscription {
  readonly target: WeakRef<object>;
  readonly forget: (target: object, scope: MemoryScope) => void;
}

// Targets are held weakly: a middleware no longer in use is not kept alive by having listened.
const subscriptions = new Set<Subscription>();

/** Calls `forget(target, scope)` for each scope purged in this process, while `target` lives. */
export function onScopePurged<Target extends object>(
  target: Target,
  forget: (target: Target, scope: MemoryScope) => void,
): void {
  subscriptions.add({ target: new WeakRef(target), forget: forget as Subscription["forget"] });
}

export function notifyScopePurged(scope: MemoryScope): void {
  for (const subscription of subscriptions) {
    const target = subscription.target.deref();
    if (target === undefined) subscriptions.delete(subscription);
    else subscription.forget(target, scope);
  }
}
