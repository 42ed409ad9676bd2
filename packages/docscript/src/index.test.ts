import assert from "node:assert/strict";
import { it } from "node:test";
import * as docscript from "./index.ts";

it("@tackle/docscript exports its curated names", () => {
  const mine = [
    "DocScriptError",
    "DocumentClientError",
    "SchemaDefinitionError",
    "createDocumentClient",
    "decodeVersion",
    "defineSchema",
    "encodeVersion",
    "field",
    "interpretDocument",
    "openDocument",
    "projectDocument",
    "timelineSchema",
  ];
  const exported = Object.keys(docscript);
  // Internals stay inside the package: the payload check, the issue formatter, the token counter.
  for (const name of ["formatIssue", "validatePayload", "tokensOf", "contentKinds", "mediaKinds"]) {
    assert.ok(!exported.includes(name), `${name} is internal`);
  }
  for (const name of mine) assert.ok(exported.includes(name), `missing export ${name}`);
  // The sandboxed tool (src/tool, src/sandbox) adds its own names; pin them in its own test.
  const toolNames = exported.filter((name) => !mine.includes(name));
  assert.deepEqual(
    toolNames.filter((name) => /^(open|interpret|define|field|timeline)/.test(name)),
    [],
    "no second schema or session entry point",
  );
});
