/**
 * Exactly once across a host restart: the host process is SIGKILLed after the document server stored its
 * plan's update and before the answer reached it. A new host process takes the model's next call, which
 * is what the tool tells the model to do when a commit got no answer: commit-plan with the same plan_id.
 * The edit is applied once. And when the server never stored the plan, the new host says so, and
 * running the script again applies it once too.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, test } from "node:test";
import { LoroDoc } from "loro-crdt";
import { createDocumentClient } from "../src/client/create-document-client.ts";
import { interpretDocument } from "../src/document/interpret.ts";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { type RunningDocumentServer, serveDocuments } from "../src/server/serve-documents.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { renderPrompt } from "../src/tool/prompt.ts";

const adminToken = "admin-token-for-tests-0123456789";
const token = "document-token-for-tests-0123456789";
const hostToken = "host-token-for-tests-0123456789";
const exclaim = `const [caption] = entities.list({ entityKind: 'caption' });
entities.update(caption.entityId, [{ op: 'splice', path: ['text'], index: caption.payload.text.length, insert: '!' }]);`;

/** A host process and a way to make one call on it (its answer, or undefined when it died first). */
function startHost(url: string) {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      "--conditions=@tackle/source",
      new URL("./fixtures/host-process.ts", import.meta.url).pathname,
      url,
      hostToken,
      "killed-after-store,killed-before-store",
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<Record<string, unknown> | undefined> => {
    const line = await lines.next();
    return line.done === true ? undefined : (JSON.parse(line.value) as Record<string, unknown>);
  };
  return {
    child,
    ready: next(),
    async call(input: unknown): Promise<Record<string, unknown> | undefined> {
      child.stdin!.write(`${JSON.stringify(input)}\n`);
      return next();
    },
    exited: new Promise<NodeJS.Signals | number | null>((resolve) =>
      child.once("exit", (code, signal) => resolve(signal ?? code)),
    ),
  };
}

describe("exactly once across a host restart", () => {
  let directory: string;
  let server: RunningDocumentServer;
  /** Set by a test: called once the store holds an update, before the server answers the push. */
  let afterStore: (() => Promise<void>) | undefined;

  before(async () => {
    directory = mkdtempSync(join(tmpdir(), "docscript-exactly-once-"));
    const inner = createSqliteDocumentStore({ path: join(directory, "documents.sqlite") });
    const store: DocumentStore = {
      ...inner,
      async append(input) {
        await inner.append(input);
        const hook = afterStore;
        afterStore = undefined;
        await hook?.();
      },
    };
    server = await serveDocuments({ store, schema: timelineSchema, adminToken, hostTokens: [hostToken] });
  });
  after(async () => {
    await server.close();
    rmSync(directory, { recursive: true, force: true });
  });

  const createDocument = async (docId: string) => {
    const client = createDocumentClient({ origin: server.url, token });
    await client.createDocument(docId, { adminToken, token, snapshot: sampleTimelineSnapshot() });
    return async () => {
      const doc = new LoroDoc();
      await client.pullInto(docId, doc);
      return interpretDocument(doc, timelineSchema).entities.find((entity) => entity.entityKind === "caption")
        ?.payload.text;
    };
  };

  test("SIGKILL after the server stored the update: the new host answers committed (duplicate), applied once", async () => {
    const captionText = await createDocument("killed-after-store");
    const original = String(await captionText());
    const first = startHost(server.url);
    await first.ready;
    const run = await first.call({ op: "run-edit-script", doc_id: "killed-after-store", script: exclaim });
    assert.equal(run?.ok, true, JSON.stringify(run));
    const planId = run?.plan_id as string;
    // The store holds the update; the host dies before the answer reaches it.
    afterStore = async () => {
      first.child.kill("SIGKILL");
      await first.exited;
    };
    const lost = await first.call({ op: "commit-plan", doc_id: "killed-after-store", plan_id: planId });
    assert.equal(lost, undefined, "the host died without answering");
    assert.equal(await first.exited, "SIGKILL");
    assert.equal(await captionText(), `${original}!`, "the server stored the update");

    // The model follows the tool's instructions for a commit that got no answer: the same plan_id again.
    const prompt = renderPrompt({
      toolName: "docscript",
      docId: "killed-after-store",
      changed: null,
      timeoutMs: 1,
    });
    assert.match(prompt, /unanswered[^\n]*commit-plan again with the same plan_id/);
    const second = startHost(server.url);
    await second.ready;
    const retried = await second.call({ op: "commit-plan", doc_id: "killed-after-store", plan_id: planId });
    assert.equal(retried?.ok, true, JSON.stringify(retried));
    assert.equal(retried?.status, "committed");
    assert.equal(retried?.duplicate, true);
    assert.equal(await captionText(), `${original}!`, "applied once");
    second.child.kill("SIGTERM");
    await second.exited;
  });

  test("SIGKILL before anything was stored: the new host says the plan was never applied; running again applies once", async () => {
    const captionText = await createDocument("killed-before-store");
    const original = String(await captionText());
    const first = startHost(server.url);
    await first.ready;
    const run = await first.call({ op: "run-edit-script", doc_id: "killed-before-store", script: exclaim });
    assert.equal(run?.ok, true, JSON.stringify(run));
    first.child.kill("SIGKILL");
    await first.exited;
    const second = startHost(server.url);
    await second.ready;
    const retried = await second.call({
      op: "commit-plan",
      doc_id: "killed-before-store",
      plan_id: run?.plan_id,
    });
    assert.equal(retried?.ok, false);
    const error = retried?.error as { code: string; message: string; data?: unknown };
    assert.equal(error.code, "not_found");
    assert.deepEqual(error.data, { resource: "plan", id: run?.plan_id });
    assert.match(error.message, /never applied; run the script again/);
    const again = await second.call({
      op: "run-edit-script",
      doc_id: "killed-before-store",
      script: exclaim,
      auto_commit: true,
    });
    assert.equal(
      (again?.commit as { status: string } | undefined)?.status,
      "committed",
      JSON.stringify(again),
    );
    assert.equal(await captionText(), `${original}!`);
    second.child.kill("SIGTERM");
    await second.exited;
  });
});
