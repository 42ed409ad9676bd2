/** A token bucket per tenant: `requestsPerSecond` sustained, `burst` at once; refusals say when to retry. */
export interface RateLimit {
  readonly requestsPerSecond: number;
  /** Bucket size (default: one second's worth, at least 1). */
  readonly burst?: number;
}

export function createRateLimiter(limit: RateLimit, now: () => number = () => performance.now()) {
  const capacity = Math.max(1, limit.burst ?? Math.ceil(limit.requestsPerSecond));
  const buckets = new Map<string, { tokens: number; at: number }>();
  return {
    /** 0 when the request may proceed, else the seconds until a token is free. */
    take(key: string): number {
      const time = now();
      const bucket = buckets.get(key) ?? { tokens: capacity, at: time };
      bucket.tokens = Math.min(
        capacity,
        bucket.tokens + ((time - bucket.at) / 1000) * limit.requestsPerSecond,
      );
      bucket.at = time;
      buckets.set(key, bucket);
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return 0;
      }
      return (1 - bucket.tokens) / limit.requestsPerSecond;
    },
  };
}
