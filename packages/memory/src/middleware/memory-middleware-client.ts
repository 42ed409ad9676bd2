/** The two calls the middlewares make; `MemoryClient` provides them (and a test double may). */

import type { WriteEventRequest, WriteEventResponse } from "../schemas/event.ts";
import type { ContextBundleRequest, ContextBundleResponse } from "../schemas/synthesis.ts";

export interface MemoryMiddlewareClient {
  buildContextBundle(
    request: ContextBundleRequest,
    options?: { signal?: AbortSignal },
  ): Promise<ContextBundleResponse>;
  writeEvent(request: WriteEventRequest, options?: { signal?: AbortSignal }): Promise<WriteEventResponse>;
}
