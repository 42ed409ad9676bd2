/**
 * The runtime over a real nats-server (started on a free port; the run fails with the install
 * command when none is on PATH): serving, unknown tools, issued subjects, three modules on one node.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import { Svcm } from "@nats-io/services";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { type NatsServerHandle, startNatsServer, underLoadMs } from "@tackle/test-support";
import {
  createMeshClient,
  issueMembership,
  listMemberships,
  openMeshBuckets,
  readCatalogue,
  revokeMembership,
  startNodeRuntime,
} from "../src/index.ts";
import { eventually, fixture, meshConfig, recordingLogger } from "./helpers.ts";

let nats: NatsServerHandle;
before(async () => {
  nats = await startNatsServer();
});
after(async () => {
  await nats?.close();
});

async function answers(connection: NatsConnection, subject: string): Promise<boolean> {
  try {
    await connection.request(subject, "{}", { timeout: 1000 });
    return true;
  } catch {
    return false;
  }
}

describe("a node runtime on NATS: serving and errors", () => {
  it("serves a registered tool that a separate connection invokes by name, and refuses an unknown tool clearly", async () => {
    const runtime = await startNodeRuntime({
      config: meshConfig("node-a", nats.url, [{ module: "alpha", path: fixture("alpha.ts") }]),
    });
    const client = await createMeshClient({ servers: nats.url });
    try {
      assert.deepEqual(await client.call("alpha.echo", { text: "over the bus" }), {
        ok: true,
        output: { text: "over the bus" },
      });
      assert.deepEqual(await client.call("alpha.add", { a: 2, b: 40 }), { ok: true, output: 42 });
      // The catalogue carries a tool's output schema where it declares one, and none where it does not.
      const alpha = (await client.catalogue()).find((info) => info.module === "alpha");
      const echo = alpha?.tools.find((tool) => tool.name === "echo");
      assert.equal(echo?.outputSchema?.type, "object");
      assert.deepEqual(Object.keys(echo?.outputSchema?.properties ?? {}), ["text"]);
      assert.equal(alpha?.tools.find((tool) => tool.name === "add")?.outputSchema, undefined);

      const unknown = await client.call("alpha.nope", {});
      assert.equal(unknown.ok, false);
      assert.equal(!unknown.ok && unknown.error.code, "unknown_tool");
      assert.match(
        !unknown.ok ? unknown.error.message : "",
        /Unknown tool "alpha\.nope"\. Available: alpha\.echo, alpha\.add/,
      );

      const invalid = await client.call("alpha.echo", { text: 7 });
      assert.equal(!invalid.ok && invalid.error.code, "invalid_input");
      // Named as the caller called it, not by the module's bare name.
      assert.match(!invalid.ok ? invalid.error.message : "", /^Invalid input for tool "alpha\.echo"/);
      assert.equal(!invalid.ok && (invalid.error.data as { tool: string }).tool, "alpha.echo");
      assert.deepEqual(!invalid.ok && (invalid.error.data as { issues: unknown[] }).issues, [
        { path: ["text"], message: "Invalid input: expected string, received number" },
      ]);

      const failed = await client.call("alpha.fail", {});
      assert.equal(!failed.ok && failed.error.code, "tool_failed");
      assert.match(!failed.ok ? failed.error.message : "", /alpha\.fail always fails/);

      // The caller's time limit travels with the call: the far side stops the tool and says so.
      let started = Date.now();
      const slow = await client.call("alpha.slow", { ms: 5000 }, { timeoutMs: 200 });
      assert.equal(!slow.ok && slow.error.code, "timeout");
      assert.match(!slow.ok ? slow.error.message : "", /Tool "alpha\.slow" timed out after 200 ms/);
      assert.ok(Date.now() - started < 3000, "long before the tool's 5 s");
      started = Date.now();
      const aborted = await client.call("alpha.slow", { ms: 5000 }, { signal: AbortSignal.timeout(100) });
      assert.equal(!aborted.ok && aborted.error.code, "aborted");
      assert.ok(Date.now() - started < 3000, "long before the tool's 5 s");
      // Aborting reaches the far side: the tool's own signal fires.
      const cancelling = await client.call("alpha.cancellable", {}, { signal: AbortSignal.timeout(100) });
      assert.equal(!cancelling.ok && cancelling.error.code, "aborted");
      await eventually("the tool saw its cancellation", async () => {
        const count = await client.call("alpha.cancelled", {});
        return count.ok && count.output === 1 ? true : undefined;
      });

      const missingModule = await client.call("ghost.tool", {});
      assert.equal(!missingModule.ok && missingModule.error.code, "unreachable");
      const notAName = await client.call("no-dot", {});
      assert.equal(!notAName.ok && notAName.error.code, "invalid_request");
    } finally {
      await client.close();
      await runtime.close();
    }
  });

  it("puts errors in the services API's error headers and the JSON Schema in endpoint metadata", async () => {
    const runtime = await startNodeRuntime({
      config: meshConfig("node-h", nats.url, [{ module: "headers", path: fixture("alpha.ts") }]),
    });
    const raw = await connect({ servers: nats.url });
    try {
      const reply = await raw.request("tackle.tools.headers.echo", JSON.stringify({ text: 1 }), {
        timeout: 2000,
      });
      assert.equal(reply.headers?.get("Nats-Service-Error-Code"), "400");
      assert.match(reply.headers?.get("Nats-Service-Error") ?? "", /Invalid input for tool "headers\.echo"/);
      assert.equal(reply.headers?.get("Tackle-Error-Code"), "invalid_input");
      assert.equal(reply.json<{ code: string }>().code, "invalid_input");

      const infos = await new Svcm(raw as never).client().info("headers");
      const [info] = await Array.fromAsync(infos);
      const echo = info?.endpoints.find((endpoint) => endpoint.subject === "tackle.tools.headers.echo");
      assert.equal(echo?.metadata?.tool, "echo");
      assert.deepEqual(JSON.parse(echo?.metadata?.input_schema ?? "null"), {
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        properties: { text: { type: "string" } },
        required: ["text"],
      });
      const pings = await Array.fromAsync(await new Svcm(raw as never).client().ping("headers"));
      assert.equal(pings.length, 1);
    } finally {
      await raw.close();
      await runtime.close();
    }
  });
});

describe("a node runtime on NATS: issued subjects", () => {
  it("serves exactly the subjects it is issued, and re-serves on a new membership", async () => {
    const runtime = await startNodeRuntime({
      config: meshConfig("node-b", nats.url, [{ module: "issued", path: fixture("alpha.ts") }]),
    });
    const client = await createMeshClient({ servers: nats.url });
    const raw = await connect({ servers: nats.url });
    try {
      await issueMembership(client.connection, { node: "node-b", module: "issued", prefix: "acme.first" });
      await eventually("the first membership served", async () =>
        (await answers(raw, "acme.first.echo")) ? true : undefined,
      );
      assert.equal(
        await answers(raw, "tackle.tools.issued.echo"),
        false,
        "the default prefix stops answering",
      );
      assert.deepEqual(await client.call("issued.echo", { text: "first" }), {
        ok: true,
        output: { text: "first" },
      });

      await issueMembership(client.connection, { node: "node-b", module: "issued", prefix: "acme.second" });
      await eventually("the second membership served", async () =>
        (await answers(raw, "acme.second.echo")) ? true : undefined,
      );
      await eventually("the first membership dropped", async () =>
        (await answers(raw, "acme.first.echo")) ? undefined : true,
      );
      // The client learns the new prefix from the catalogue when the old one stops answering.
      assert.deepEqual(await client.call("issued.echo", { text: "second" }), {
        ok: true,
        output: { text: "second" },
      });

      const served = runtime.modules().find((module) => module.module === "issued");
      assert.equal(served?.prefix, "acme.second");
      const [info] = await Array.fromAsync(await new Svcm(raw as never).client().info("issued"));
      assert.deepEqual(info?.endpoints.map((endpoint) => endpoint.subject).sort(), [
        "acme.second.add",
        "acme.second.cancellable",
        "acme.second.cancelled",
        "acme.second.echo",
        "acme.second.fail",
        "acme.second.slow",
        "acme.second.tools",
      ]);
      assert.deepEqual(
        (await listMemberships(client.connection, { node: "node-b" })).map((record) => record.prefix),
        ["acme.second"],
      );
      assert.equal(
        (await readCatalogue(client.connection)).find((record) => record.module === "issued")?.prefix,
        "acme.second",
      );

      // Another module cannot take a prefix that is already issued; a malformed seat is refused by name.
      await assert.rejects(
        issueMembership(client.connection, { node: "node-b", module: "other", prefix: "acme.second" }),
        /prefix acme\.second is already module issued's/,
      );
      await assert.rejects(
        issueMembership(client.connection, { node: "node-b", module: "other", seats: { "bad seat": "x" } }),
        /bad seat name "bad seat"/,
      );

      // A revoke stops serving (it used to move the module back to its default prefix).
      assert.equal(await revokeMembership(client.connection, { node: "node-b", module: "issued" }), true);
      await eventually("the revoked module no longer served", async () =>
        (await answers(raw, "acme.first.echo")) ? undefined : true,
      );
      assert.equal(await answers(raw, "tackle.tools.issued.echo"), false);
      assert.equal(await answers(raw, "acme.second.echo"), false);
      assert.equal(
        (await readCatalogue(client.connection)).some((record) => record.module === "issued"),
        false,
      );
    } finally {
      await raw.close();
      await client.close();
      await runtime.close();
    }
  });
});

describe("a node runtime on NATS: several modules on one node", () => {
  it("serves three modules' bundles on one node, one broken and named, with every seat verb where the membership put it", async () => {
    const logger = recordingLogger();
    const admin = await connect({ servers: nats.url });
    await issueMembership(admin, {
      node: "node-c",
      module: "ledger",
      prefix: "c.ledger",
      seats: { ledger: "seats.ledger" },
    });
    await issueMembership(admin, { node: "node-c", module: "notes", prefix: "c.notes", seats: ["notes"] });
    await issueMembership(admin, { node: "node-c", module: "broken", prefix: "c.broken" });
    await issueMembership(admin, { node: "node-c", module: "gone", prefix: "c.gone" });
    const runtime = await startNodeRuntime({
      // A python3 child: its start took 11 s at load 35, past the 10 s default this test does not check.
      load: { child: { handshakeTimeoutMs: underLoadMs(10_000) } },
      logger,
      config: meshConfig("node-c", nats.url, [
        { module: "ledger", path: fixture("beta.mjs") },
        { module: "notes", path: fixture("python-bundle.py") },
        { module: "broken", path: fixture("alpha.ts") },
        { module: "broken", path: fixture("throws-at-import.js") },
        { module: "gone", path: fixture("throws-at-import.js") },
      ]),
    });
    const client = await createMeshClient({ servers: nats.url, connection: admin });
    try {
      assert.deepEqual(await client.callSeat("ledger", "append", { line: "one" }), {
        ok: true,
        output: { count: 1, node: "node-c", module: "ledger" },
      });
      assert.deepEqual((await admin.request("seats.ledger.read", "{}", { timeout: 2000 })).json(), {
        entries: ["one"],
      });
      assert.deepEqual(
        (
          await admin.request("tackle.seats.notes.write", JSON.stringify({ text: "hi" }), { timeout: 5000 })
        ).json(),
        {
          written: "hi",
          by: "python",
        },
      );
      assert.deepEqual(await client.callSeat("notes", "write", { text: "again" }), {
        ok: true,
        output: { written: "again", by: "python" },
      });
      // A module that holds no seat answers no seat subject.
      assert.equal(await answers(admin, "tackle.seats.context"), false);

      // The broken bundle is named, not fatal: its module's other bundle serves.
      assert.deepEqual(await client.call("broken.echo", { text: "still here" }), {
        ok: true,
        output: { text: "still here" },
      });
      const catalogue = await client.catalogue();
      const byName = Object.fromEntries(catalogue.map((module) => [module.module, module]));
      assert.equal(byName.ledger?.status, "ok");
      assert.equal(byName.notes?.status, "ok");
      assert.equal(byName.broken?.status, "ok");
      assert.deepEqual(byName.broken?.errors, [
        { source: fixture("throws-at-import.js"), message: "broken bundle: cannot reach its database" },
      ]);
      assert.equal(
        byName.gone?.status,
        "failed",
        "a module whose only bundle throws is failed, and still listed",
      );
      assert.deepEqual(
        byName.notes?.tools.map((tool) => tool.name),
        ["upper", "whoami", "crash", "sleep", "say", "dot", "key", "strict", "notes.write"],
      );
      assert.ok(
        logger.lines.some(
          (line) =>
            line.level === "error" &&
            line.fields.source === fixture("throws-at-import.js") &&
            line.fields.module === "broken",
        ),
        "the log names the broken bundle",
      );
    } finally {
      await runtime.close();
      await client.close();
      await admin.close();
    }
  });
});

describe("a node runtime on NATS: re-serving and unreachable modules", () => {
  it("keeps answering while it re-serves: calls across a membership change all succeed", async () => {
    const logger = recordingLogger();
    const runtime = await startNodeRuntime({
      logger,
      config: meshConfig("node-d", nats.url, [{ module: "steady", path: fixture("alpha.ts") }]),
    });
    const client = await createMeshClient({ servers: nats.url });
    try {
      let stop = false;
      const outcomes: string[] = [];
      const load = (async () => {
        while (!stop) {
          const result = await client.call("steady.add", { a: 1, b: 2 });
          outcomes.push(result.ok ? "ok" : result.error.code);
        }
      })();
      for (const prefix of ["d.one", "d.two", "d.three"]) {
        await issueMembership(client.connection, { node: "node-d", module: "steady", prefix });
        await eventually(`re-served on ${prefix}`, async () =>
          runtime.modules()[0]?.prefix === prefix ? true : undefined,
        );
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      stop = true;
      await load;
      assert.ok(outcomes.length > 10, `only ${outcomes.length} calls ran`);
      assert.deepEqual(
        outcomes.filter((outcome) => outcome !== "ok"),
        [],
      );

      // A malformed record is refused by name in the log; the module keeps answering where it was.
      const { membership } = await openMeshBuckets(client.connection);
      await membership.put(
        "node-d.steady",
        JSON.stringify({ node: "node-d", module: "steady", prefix: "bad..prefix" }),
      );
      await eventually("the refusal logged", async () =>
        logger.lines.some((line) => line.message.startsWith("membership record refused")) ? true : undefined,
      );
      assert.equal(runtime.modules()[0]?.prefix, "d.three");
      await assert.rejects(
        listMemberships(client.connection, { node: "node-d" }),
        /tackle-mesh-membership\/node-d\.steady: bad subject prefix/,
      );
      const skipped: string[] = [];
      assert.deepEqual(
        await listMemberships(
          client.connection,
          { node: "node-d" },
          { onInvalid: (key) => skipped.push(key) },
        ),
        [],
      );
      assert.deepEqual(skipped, ["node-d.steady"]);
      assert.deepEqual(await client.call("steady.add", { a: 2, b: 2 }), { ok: true, output: 4 });
    } finally {
      await client.close();
      await runtime.close();
    }
  });

  it("names a catalogued module that no runtime answers for as unreachable, never dropping it", async () => {
    const client = await createMeshClient({ servers: nats.url });
    try {
      // Reading an unused mesh creates nothing and finds nothing.
      const fresh = await startNatsServer();
      const reader = await connect({ servers: fresh.url });
      try {
        assert.deepEqual(await readCatalogue(reader), []);
        assert.deepEqual(await listMemberships(reader), []);
        assert.deepEqual(await Array.fromAsync(new Kvm(reader).list()), []);
      } finally {
        await reader.close();
        await fresh.close();
      }

      await issueMembership(client.connection, { node: "elsewhere", module: "offline", prefix: "x.offline" });
      const catalogue = await client.catalogue();
      const offline = catalogue.find((module) => module.module === "offline");
      assert.equal(offline?.status, "unreachable");
      assert.match(offline?.errors[0]?.message ?? "", /no runtime answered for module "offline"/);
      const call = await client.call("offline.anything", {});
      assert.equal(!call.ok && call.error.code, "unreachable");
    } finally {
      await revokeMembership(client.connection, { node: "elsewhere", module: "offline" });
      await client.close();
    }
  });
});
