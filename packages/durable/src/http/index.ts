/** `@tackle/durable/http`: runs over HTTP (Hono) — start, frames as SSE resumable by Last-Event-ID, resume — and a client. */
export { type AgUiEvent, type AgUiRunIds, toAgUiEvents } from "./ag-ui.ts";
export { createDurableApp, type DurableAppOptions } from "./create-durable-app.ts";
export {
  createDurableClient,
  type DurableClient,
  type DurableClientOptions,
} from "./create-durable-client.ts";
export { type DurableServer, type ServeDurableOptions, serveDurable } from "./serve-durable.ts";
