import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, it } from "node:test";
import { MeshConfigError } from "../errors/mesh-config-error.ts";
import { loadMeshConfig } from "./load-mesh-config.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-mesh-config-"));
after(() => rmSync(directory, { recursive: true, force: true }));

/** A credentials file whose user JWT is named `name` (the signature is not checked here). */
function credentials(name: string | undefined): string {
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const jwt = `${encode({ typ: "JWT", alg: "ed25519-nkey" })}.${encode({ name, sub: "UABC", nats: { type: "user" } })}.c2ln`;
  const path = join(directory, `${name ?? "anonymous"}.creds`);
  writeFileSync(
    path,
    `-----BEGIN NATS USER JWT-----\n${jwt}\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\nSUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU\n------END USER NKEY SEED------\n`,
  );
  return path;
}

function refused(env: NodeJS.ProcessEnv, variable: string, message: RegExp): void {
  assert.throws(
    () => loadMeshConfig(env),
    (error: unknown) => {
      assert.ok(MeshConfigError.isInstance(error), "a MeshConfigError");
      assert.equal(error.variable, variable);
      assert.match(error.message, message);
      assert.ok(error.message.startsWith(`${variable}: `), "the message names the variable first");
      return true;
    },
  );
}

describe("loadMeshConfig", () => {
  it("reads the MESH_* variables and MESH_NODE", () => {
    const config = loadMeshConfig({
      MESH_NODE: "bench-01",
      MESH_BROKER_URL: "nats://127.0.0.1:4222, tls://nats.example:4443",
      MESH_TOOL_MODULES:
        "alpha=/opt/alpha/tools/index.js, beta=/opt/beta/dist/index.js,alpha=/opt/alpha/extra.py",
      MESH_OPERATOR_ACCOUNT: "ada",
      MESH_OPERATOR_HOME: "/home/ada",
      MESH_CONSOLE_LISTEN: "[::1]:4280",
    });
    assert.deepEqual(config, {
      node: "bench-01",
      brokerUrl: "nats://127.0.0.1:4222, tls://nats.example:4443",
      modules: [
        { module: "alpha", path: "/opt/alpha/tools/index.js" },
        { module: "beta", path: "/opt/beta/dist/index.js" },
        { module: "alpha", path: "/opt/alpha/extra.py" },
      ],
      operatorAccount: "ada",
      operatorHome: "/home/ada",
      consoleListen: { host: "::1", port: 4280 },
    });
  });

  it("defaults the console to 127.0.0.1:4270, the node to the host name, and no modules", () => {
    const config = loadMeshConfig({});
    assert.deepEqual(config.consoleListen, { host: "127.0.0.1", port: 4270 });
    assert.deepEqual(config.modules, []);
    assert.match(config.node, /^[A-Za-z0-9_-]{1,64}$/);
    assert.equal(config.brokerUrl, undefined);
  });

  it("gives a bare path to the credential's own module, and resolves relative paths", () => {
    const creds = credentials("ledger");
    const config = loadMeshConfig({
      MESH_BROKER_FILE: creds,
      MESH_TOOL_MODULES: "/srv/ledger/index.js,notes=bundles/notes.py",
    });
    assert.equal(config.brokerFile, creds);
    assert.deepEqual(config.modules, [
      { module: "ledger", path: "/srv/ledger/index.js" },
      { module: "notes", path: resolve("bundles/notes.py") },
    ]);
  });

  it("refuses every malformed value naming its variable", () => {
    refused({ MESH_NODE: "my.host" }, "MESH_NODE", /not a node name/);
    refused({ MESH_BROKER_URL: "http://127.0.0.1:4222" }, "MESH_BROKER_URL", /not a NATS server URL/);
    refused({ MESH_BROKER_URL: "nats://[oops" }, "MESH_BROKER_URL", /not a URL/);
    // The message names the value but never the password it carries.
    assert.throws(
      () => loadMeshConfig({ MESH_BROKER_URL: "http://alice:s3cret-pass@127.0.0.1:4222" }),
      (error: Error) =>
        /http:\/\/\*\*\*@127\.0\.0\.1:4222/.test(error.message) && !/s3cret-pass/.test(error.message),
    );
    refused(
      { MESH_BROKER_FILE: join(directory, "missing.creds") },
      "MESH_BROKER_FILE",
      /cannot read the credentials file/,
    );
    const notCreds = join(directory, "plain.txt");
    writeFileSync(notCreds, "hello");
    refused({ MESH_BROKER_FILE: notCreds }, "MESH_BROKER_FILE", /is not a NATS credentials file/);
    refused({ MESH_TOOL_MODULES: "alpha=/a.js,,beta=/b.js" }, "MESH_TOOL_MODULES", /entry 2 is empty/);
    refused({ MESH_TOOL_MODULES: "al pha=/a.js" }, "MESH_TOOL_MODULES", /"al pha" is not a module name/);
    refused({ MESH_TOOL_MODULES: "alpha.x=/a.js" }, "MESH_TOOL_MODULES", /"alpha\.x" is not a module name/);
    refused({ MESH_TOOL_MODULES: "alpha=" }, "MESH_TOOL_MODULES", /has no path/);
    refused(
      { MESH_TOOL_MODULES: "/srv/a.js" },
      "MESH_TOOL_MODULES",
      /bare path.*MESH_BROKER_FILE is not set/,
    );
    refused(
      { MESH_TOOL_MODULES: "/srv/a.js", MESH_BROKER_FILE: credentials(undefined) },
      "MESH_TOOL_MODULES",
      /names no valid module/,
    );
    refused({ MESH_OPERATOR_HOME: "home/ada" }, "MESH_OPERATOR_HOME", /absolute path/);
    refused({ MESH_CONSOLE_LISTEN: "4270" }, "MESH_CONSOLE_LISTEN", /not host:port/);
    refused({ MESH_CONSOLE_LISTEN: "127.0.0.1:99999" }, "MESH_CONSOLE_LISTEN", /not host:port/);
    refused({ MESH_CALLS_CONCURRENT: "0" }, "MESH_CALLS_CONCURRENT", /at least 1/);
    refused({ MESH_CALLS_CONCURRENT: "12.5" }, "MESH_CALLS_CONCURRENT", /whole number/);
    refused({ MESH_CALLS_WAITING: "-1" }, "MESH_CALLS_WAITING", /at least 0/);
  });

  it("reads the call limits of ADR 0214, and leaves them out when unset", () => {
    assert.deepEqual(loadMeshConfig({ MESH_CALLS_CONCURRENT: "32", MESH_CALLS_WAITING: "0" }).calls, {
      concurrent: 32,
      waiting: 0,
    });
    assert.equal(loadMeshConfig({}).calls, undefined);
  });
});
