import assert from "node:assert/strict";
import { it } from "node:test";
import * as mesh from "./index.ts";

it("@tackle/mesh exports exactly its curated names", () => {
  assert.deepEqual(Object.keys(mesh).sort(), [
    "CATALOGUE_BUCKET",
    "DEFAULT_BROKER_URL",
    "DEFAULT_CONSOLE_LISTEN",
    "MEMBERSHIP_BUCKET",
    "MeshConfigError",
    "RESERVED_TOOL_NAME",
    "clientPermissions",
    "connectMesh",
    "createMeshAuthority",
    "createMeshClient",
    "defaultModulePrefix",
    "defaultSeatPrefix",
    "formatListenAddress",
    "initOperatorHome",
    "issueClientCredential",
    "issueIssuerCredential",
    "issueMembership",
    "issueNodeCredential",
    "issueSystemCredential",
    "listMemberships",
    "loadMeshConfig",
    "loadModules",
    "nodePermissions",
    "openMeshBuckets",
    "openOperatorHome",
    "parseListenAddress",
    "pushAccount",
    "readCatalogue",
    "recordIssued",
    "recordRevoked",
    "redactBrokerUrl",
    "resultsBucket",
    "revokeCredential",
    "revokeMembership",
    "serverConfig",
    "startNodeRuntime",
  ]);
});
