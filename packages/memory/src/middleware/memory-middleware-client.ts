/** The two calls the middlewares make: a `MemoryClient` is one; the core's unit tests use a recorder. */

import type { WriteEventRequest, WriteEventResponse } from "../schemas/event.ts";
import type { ContextBundleRequest, ContextBundleResponse } from "../schemas/synthesis.ts";

export interface MemoryMiddlewareClient {
  contextBundle(
    request: ContextBundleRequest,
    options?: { signal?: AbortSignal; timeoutMs?: number },
  ): Promise<ContextBundleResponse>;
  writeEvent(request: WriteEventRequest, options?: { signal?: AbortSignal }): Promise<WriteEventResponse>;
}
