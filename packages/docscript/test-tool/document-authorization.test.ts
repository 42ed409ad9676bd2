/**
 * A tool is told which documents its calls may open, and asks before any read: an id it may not open
 * answers exactly as a document that does not exist, even though its host credential opens both.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createToolSet, isNotFound } from "@tackle/core";
import { createDocScriptTool, type DocScriptResult } from "../src/tool/create-doc-script-tool.ts";
import { type Harness, hostToken, startHarness } from "./harness.ts";

let harness: Harness;

/** A failure with the document id it names replaced, to compare two ids' answers. */
const anonymous = (result: DocScriptResult, docId: string) =>
  JSON.parse(JSON.stringify(result).replaceAll(docId, "<id>")) as unknown;

describe("which documents a tool may open", () => {
  before(async () => {
    harness = await startHarness();
    await harness.createDocument("ours");
    await harness.createDocument("theirs");
  });
  after(async () => {
    await harness.close();
  });

  test("a tool with no rule, or two, is refused when it is made", () => {
    const base = { httpOrigin: harness.server.url, authToken: hostToken };
    assert.throws(() => createDocScriptTool(base as never), TypeError);
    assert.throws(
      () => createDocScriptTool({ ...base, documents: ["ours"], authorize: () => true } as never),
      TypeError,
    );
  });

  test("another document's id answers as a missing one, and the server never hears of it", async () => {
    const asked: string[] = [];
    const tool = harness.tool({
      // Only a truly missing id and ours pass the rule, so the missing one gets the server's own answer.
      authorize: (docId) => docId === "ours" || docId === "missing",
      fetchImpl: (input, init) => {
        asked.push(String(input instanceof Request ? input.url : input));
        return fetch(input, init);
      },
    });
    const ours = await tool.handle({ op: "run-edit-script", doc_id: "ours", script: "entities.list();" });
    assert.ok(ours.ok && ours.op === "run-edit-script", JSON.stringify(ours));
    const calls = (docId: string) => [
      { op: "snapshot", doc_id: docId },
      { op: "snapshot", doc_id: docId, related_to: "clip-1" },
      {
        op: "run-edit-script",
        doc_id: docId,
        script: "for (const e of entities.list()) entities.delete(e.entityId);",
        auto_commit: true,
      },
      { op: "commit-plan", doc_id: docId, plan_id: "plan_00000000-0000-4000-8000-000000000000" },
      { op: "commit-plan", doc_id: docId, plan_id: ours.plan_id },
    ];
    const missing = calls("missing");
    const theirs = calls("theirs");
    for (const [index, call] of theirs.entries()) {
      const refused = await tool.handle(call);
      assert.ok(!refused.ok, JSON.stringify(refused));
      assert.equal(refused.error.code, "not_found");
      assert.equal((refused.error.data as { resource?: unknown }).resource, "document");
      // A plan of another document is named as such before the server is asked (not about "theirs").
      if (call.plan_id === ours.plan_id) continue;
      const absent = await tool.handle(missing[index]);
      assert.deepEqual(anonymous(refused, "theirs"), anonymous(absent, "missing"), call.op);
    }
    await assert.rejects(tool.getModelContext({ doc_id: "theirs", context_id: "c" }), (error: unknown) => {
      return isNotFound(error, "document");
    });
    assert.deepEqual(
      asked.filter((url) => url.includes("/theirs")),
      [],
      "no request named their document",
    );
    // Their document is as it was.
    assert.ok((await harness.read("theirs")).entities.length > 0);
  });

  test("a fixed list opens those ids only; authorize hears the caller's identity through a tool set", async () => {
    const fixed = harness.tool({ documents: ["ours"] });
    assert.ok((await fixed.handle({ op: "snapshot", doc_id: "ours" })).ok);
    const refused = await fixed.handle({ op: "snapshot", doc_id: "theirs" });
    assert.ok(!refused.ok && refused.error.code === "not_found");

    const heard: unknown[] = [];
    const tool = harness.tool({
      authorize: async (docId, context) => {
        heard.push({ docId, op: context.op, user: context.identity?.userId });
        return context.identity?.userId === "ada" && docId === "theirs";
      },
    });
    const tools = createToolSet([tool]);
    const bob = await tools.call(
      "docscript",
      { op: "snapshot", doc_id: "theirs" },
      { identity: { userId: "bob" } },
    );
    assert.ok(!bob.ok && bob.error.code === "not_found", JSON.stringify(bob));
    const ada = await tools.call(
      "docscript",
      { op: "snapshot", doc_id: "theirs" },
      { identity: { userId: "ada" } },
    );
    assert.ok(ada.ok, JSON.stringify(ada));
    assert.deepEqual(heard, [
      { docId: "theirs", op: "snapshot", user: "bob" },
      { docId: "theirs", op: "snapshot", user: "ada" },
    ]);
    // An authorize that throws refuses, as a missing document.
    const broken = harness.tool({
      authorize: () => {
        throw new Error("the policy service is down");
      },
    });
    const down = await broken.handle({ op: "snapshot", doc_id: "ours" });
    assert.ok(!down.ok && down.error.code === "not_found");
  });
});
