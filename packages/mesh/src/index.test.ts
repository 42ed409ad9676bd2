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
    "connectMesh",
    "createMeshClient",
    "defaultModulePrefix",
    "defaultSeatPrefix",
    "formatListenAddress",
    "issueMembership",
    "listMemberships",
    "loadMeshConfig",
    "loadModules",
    "openMeshBuckets",
    "parseListenAddress",
    "readCatalogue",
    "redactBrokerUrl",
    "revokeMembership",
    "startNodeRuntime",
  ]);
});
