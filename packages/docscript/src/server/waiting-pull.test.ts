/**
 * A waiting pull holds a waiter on its document until a push or its `waitMs`; a caller that leaves
 * (its signal aborts: the route passes the request's, which aborts when the client disconnects) is
 * answered at once with what there is, instead of holding the server's wait to its end.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { underLoadMs } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { encodeVersion } from "../document/version.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { DocumentHost } from "./document-host.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

test("a waiting pull whose caller aborts is answered at once and is not held to its wait", async () => {
  const host = new DocumentHost({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
  });
  assert.equal(await host.create("doc", "token-0123456789abcdef"), true);
  const { version } = await host.updatesSince("doc", encodeVersion(new LoroDoc().oplogVersion()));
  const controller = new AbortController();
  const started = performance.now();
  const waiting = host.updatesSince("doc", version, 20_000, { signal: controller.signal });
  setTimeout(() => controller.abort(), 50);
  const answer = await waiting;
  const took = performance.now() - started;
  // 500 ms quiet, scaled by the load: far under the 20 s wait it must not be held to.
  assert.ok(took < underLoadMs(500), `answered ${Math.round(took)} ms after the call, not at its 20 s wait`);
  assert.equal(answer.version, version);

  // Aborted before the call: no wait at all.
  const at = performance.now();
  await host.updatesSince("doc", version, 20_000, { signal: AbortSignal.abort() });
  assert.ok(performance.now() - at < 200);
});
