/**
 * MCP servers this project did not write, served as a user serves them: the reference servers
 * `@modelcontextprotocol/server-filesystem` and `@modelcontextprotocol/server-everything` (from npm),
 * each launched by a two-line shell wrapper as a module's bundle, on a node over a real nats-server,
 * and called by the mesh client. What a caller gets: the servers' own answers (text, structured
 * content, images, embedded resources, resource links), their refusals as `tool_failed` with their
 * words, arguments their schema refuses as `invalid_input` (not a tool failure), progress, and a
 * tool the mesh cannot call (it answers only task-augmented calls) left out and named, not listed
 * to fail every call.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type NatsServerHandle, startNatsServer, underLoadMs } from "@tackle/test-support";
import { createMeshClient, type MeshClient, type NodeRuntime, startNodeRuntime } from "../src/index.ts";
import { meshConfig } from "./helpers.ts";

const require = createRequire(import.meta.url);
/** A reference server's entry file, as its package's `bin` names it. */
function serverEntry(name: string): string {
  const manifest = require.resolve(`@modelcontextprotocol/${name}/package.json`);
  const bin = (JSON.parse(readFileSync(manifest, "utf8")) as { bin: Record<string, string> }).bin;
  return join(dirname(manifest), Object.values(bin)[0] ?? "");
}

const scratch = mkdtempSync(join(tmpdir(), "tackle-third-party-"));
const shared = join(scratch, "shared");
let nats: NatsServerHandle;
let runtime: NodeRuntime;
let client: MeshClient;

/** A bundle as a user writes one for a server that takes arguments: an executable wrapper script. */
function wrapper(name: string, args: string): string {
  const path = join(scratch, `${name}.sh`);
  writeFileSync(path, `#!/bin/sh\nexec "${process.execPath}" "${serverEntry(name)}" ${args}\n`);
  chmodSync(path, 0o755);
  return path;
}

before(async () => {
  mkdirSync(shared);
  writeFileSync(join(shared, "notes.txt"), "groceries: leeks, rye bread\n");
  writeFileSync(join(scratch, "secret.txt"), "not shared\n");
  // In the runtime's environment, never in a child's (ADR 0204).
  process.env.TACKLE_TEST_SECRET = "runtime-only";
  nats = await startNatsServer();
  runtime = await startNodeRuntime({
    config: meshConfig("node-3p", nats.url, [
      { module: "files", path: wrapper("server-filesystem", `"${shared}"`) },
      { module: "everything", path: wrapper("server-everything", "stdio") },
    ]),
    load: { child: { handshakeTimeoutMs: underLoadMs(20_000) } },
  });
  client = await createMeshClient({ servers: nats.url });
});

after(async () => {
  await client?.close();
  await runtime?.close();
  await nats?.close();
  rmSync(scratch, { recursive: true, force: true });
  delete process.env.TACKLE_TEST_SECRET;
});

describe("reference MCP servers as mesh modules", () => {
  it("serves the filesystem server: reads inside its folder, its own refusal outside it", async () => {
    const read = await client.call("files.read_text_file", { path: join(shared, "notes.txt") });
    assert.ok(read.ok, JSON.stringify(read));
    assert.match(JSON.stringify(read.output), /leeks, rye bread/);

    const outside = await client.call("files.read_text_file", { path: join(scratch, "secret.txt") });
    assert.equal(outside.ok, false);
    assert.equal(!outside.ok && outside.error.code, "tool_failed");
    assert.match(
      !outside.ok ? outside.error.message : "",
      /Access denied - path outside allowed directories/,
    );

    const written = await client.call("files.write_file", { path: join(shared, "new.md"), content: "# A\n" });
    assert.ok(written.ok, JSON.stringify(written));
    assert.equal(readFileSync(join(shared, "new.md"), "utf8"), "# A\n");
  });

  it("answers arguments a server's schema refuses as invalid_input, not as the tool failing", async () => {
    const refused = await client.call("everything.get-sum", { a: 1, b: "two" });
    assert.equal(refused.ok, false);
    assert.equal(!refused.ok && refused.error.code, "invalid_input", JSON.stringify(refused));
    assert.equal(!refused.ok && refused.error.retryable, false);
    assert.match(!refused.ok ? refused.error.message : "", /get-sum/);
    const summed = await client.call("everything.get-sum", { a: 1, b: 2 });
    assert.ok(summed.ok, JSON.stringify(summed));
    assert.match(JSON.stringify(summed.output), /3/);
  });

  it("passes the everything server's content as it came: structured, image, embedded resource, links", async () => {
    const structured = await client.call("everything.get-structured-content", { location: "Chicago" });
    assert.ok(structured.ok, JSON.stringify(structured));
    assert.equal(typeof (structured.output as { temperature?: unknown }).temperature, "number");

    const image = await client.call("everything.get-tiny-image", {});
    assert.ok(image.ok, JSON.stringify(image));
    const blocks = (image.output as { content?: { type: string; mimeType?: string }[] }).content ?? [];
    assert.ok(blocks.some((block) => block.type === "image" && block.mimeType === "image/png"));

    const reference = await client.call("everything.get-resource-reference", {
      resourceType: "Text",
      resourceId: 2,
    });
    assert.ok(reference.ok, JSON.stringify(reference));
    assert.match(JSON.stringify(reference.output), /"type":"resource".*demo:\/\/resource\/dynamic\/text\/2/);

    const links = await client.call("everything.get-resource-links", { count: 2 });
    assert.ok(links.ok, JSON.stringify(links));
    assert.equal(JSON.stringify(links.output).match(/"type":"resource_link"/g)?.length, 2);
  });

  it("reports a long operation's progress to the caller as it goes", async () => {
    const updates: number[] = [];
    const done = await client.call(
      "everything.trigger-long-running-operation",
      { duration: 1, steps: 4 },
      { onProgress: (update) => updates.push(update.progress) },
    );
    assert.ok(done.ok, JSON.stringify(done));
    assert.deepEqual(updates, [1, 2, 3, 4]);
  });

  it("leaves out a tool it cannot call, and names it in the module's errors; the runtime's own environment stays out", async () => {
    const everything = (await client.catalogue()).find((info) => info.module === "everything");
    assert.ok(everything);
    const names = everything.tools.map((tool) => tool.name);
    assert.ok(names.includes("echo") && names.includes("get-sum"), names.join(" "));
    assert.equal(names.includes("simulate-research-query"), false);
    assert.match(
      everything.errors.map((error) => error.message).join("\n"),
      /"simulate-research-query".*task-augmented calls.*not served/,
    );

    const env = await client.call("everything.get-env", {});
    assert.ok(env.ok, JSON.stringify(env));
    assert.doesNotMatch(JSON.stringify(env.output), /TACKLE_TEST_SECRET|runtime-only/);
    assert.match(JSON.stringify(env.output), /MESH_MODULE/);
  });
});
