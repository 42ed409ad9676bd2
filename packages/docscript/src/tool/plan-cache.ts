/** Plans kept in this process by `plan_id`: least recently used first out, an unconfirmed plan pinned. */

export interface PlanCache<Plan> {
  get(planId: string): Plan | undefined;
  set(planId: string, plan: Plan): void;
  /** A pinned plan is never evicted (an unconfirmed commit must stay retryable). */
  pin(planId: string): void;
  unpin(planId: string): void;
  readonly size: number;
}

/** `onEvict` hears of each plan the cache drops to stay within `maxPlans`. */
export function createPlanCache<Plan>(
  maxPlans: number,
  onEvict?: (planId: string, plan: Plan) => void,
): PlanCache<Plan> {
  const plans = new Map<string, Plan>();
  const pinned = new Set<string>();
  const evict = () => {
    for (const [planId, plan] of plans) {
      if (plans.size <= maxPlans) return;
      if (!pinned.has(planId)) {
        plans.delete(planId);
        onEvict?.(planId, plan);
      }
    }
  };
  return {
    get(planId) {
      const plan = plans.get(planId);
      if (plan !== undefined) {
        plans.delete(planId);
        plans.set(planId, plan);
      }
      return plan;
    },
    set(planId, plan) {
      plans.delete(planId);
      plans.set(planId, plan);
      evict();
    },
    pin(planId) {
      pinned.add(planId);
    },
    unpin(planId) {
      pinned.delete(planId);
      evict();
    },
    get size() {
      return plans.size;
    },
  };
}
