import assert from "node:assert/strict";
import { it } from "node:test";
import { DocScriptError } from "../schema/docscript-error.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { serveDocuments } from "./serve-documents.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

it("binds loopback only unless told the server is exposed", async () => {
  await assert.rejects(
    serveDocuments({
      store: createSqliteDocumentStore({ path: ":memory:" }),
      schema: timelineSchema,
      hostname: "0.0.0.0",
    }),
    (error: unknown) => DocScriptError.isInstance(error) && error.code === "refused_address",
  );
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
  });
  try {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal((await fetch(`${server.url}/documents/missing/snapshot`)).status, 404);
  } finally {
    await server.close();
  }
});
