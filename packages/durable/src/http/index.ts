/** `@tackle/durable/http`: runs over HTTP (Hono) — start, frames as SSE resumable by Last-Event-ID, resume, AG-UI 1.0 — and a client. */
export {
  type AgUiEvent,
  type AgUiRunIds,
  AgUiTranslator,
  agUiEventId,
  parseAgUiEventId,
  toAgUiEvents,
} from "./ag-ui.ts";
export { type AgUiRunInput, createDurableApp, type DurableAppOptions } from "./create-durable-app.ts";
export {
  createDurableClient,
  type DurableClient,
  type DurableClientOptions,
} from "./create-durable-client.ts";
export { type DurableServer, type ServeDurableOptions, serveDurable } from "./serve-durable.ts";
