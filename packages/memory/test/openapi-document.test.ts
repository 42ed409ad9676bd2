/**
 * `/openapi.json` as a client generator or validator meets it: valid OpenAPI 3.1 by a standard
 * validator, and every route's example request valid against the document's own schemas (ajv,
 * JSON Schema 2020-12), accepted by the running service, and answered in the documented shape.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import { type MemoryServer, memoryRoutes, serveMemory } from "@tackle/memory/server";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { routeExamples } from "../src/server/route-examples.ts";

type Schema = Record<string, unknown>;
interface Parameter {
  in: string;
  name: string;
  required?: boolean;
  schema: Schema;
  example?: unknown;
}
interface Operation {
  operationId: string;
  parameters?: Parameter[];
  requestBody?: { content: { "application/json": { schema: Schema; example?: unknown } } };
  responses: Record<string, { content?: { "application/json"?: { schema: Schema } } }>;
}
type Document = { paths: Record<string, Record<string, Operation>> };

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-openapi-"));
let server: MemoryServer;
let document: Document;

function ajv(options: { coerceTypes?: boolean } = {}) {
  const instance = new Ajv2020({ strict: false, allErrors: true, ...options });
  addFormats.default(instance);
  return instance;
}

before(async () => {
  server = await serveMemory({
    store: join(directory, "memory.db"),
    apiKeys: { "key-a": "tenant-a" },
    port: 0,
  });
  const response = await fetch(`${server.url}/openapi.json`);
  assert.equal(response.status, 200);
  document = (await response.json()) as Document;
});
after(async () => {
  await server.close();
  rmSync(directory, { recursive: true, force: true });
});

describe("the OpenAPI document", () => {
  it("is valid OpenAPI 3.1 by a standard validator", async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document) as never);
    assert.deepEqual(result.errors ?? [], []);
    assert.equal(result.valid, true);
    assert.equal(validator.version, "3.1");
  });

  it("has no pattern carrying a regular-expression flag, and every pattern compiles", () => {
    const patterns = [...JSON.stringify(document).matchAll(/"pattern":("(?:[^"\\]|\\.)*")/g)].map(
      (match) => JSON.parse(match[1]!) as string,
    );
    assert.ok(patterns.length > 0);
    for (const pattern of patterns) {
      assert.doesNotMatch(pattern, /\/[a-z]*$/, `a flag leaked into the pattern ${pattern}`);
      assert.doesNotThrow(() => new RegExp(pattern, "u"));
    }
    const userId = document.paths["/v1/memories/search"]!.post!.requestBody!.content["application/json"]
      .schema as { properties: { userId: { pattern: string } } };
    const identity = new RegExp(userId.properties.userId.pattern, "u");
    assert.ok(identity.test("alice@example.com"));
    assert.ok(!identity.test("alice\u0000"), "control characters stay refused");
  });

  it("every route has an example, valid against its own schemas, accepted by the service and answered as documented", async () => {
    const bodies = ajv();
    const parameters = ajv({ coerceTypes: true });
    for (const route of memoryRoutes) {
      const operation = document.paths[route.path]?.[route.method];
      assert.ok(operation, `${route.operationId} is in the document`);
      const example = routeExamples[route.operationId];
      assert.ok(example, `${route.operationId} has an example`);
      const media = operation.requestBody?.content["application/json"];
      if (media !== undefined) {
        assert.deepEqual(media.example, example.body, `${route.operationId}: the example is in the document`);
        const valid = bodies.validate(media.schema, media.example);
        assert.ok(valid, `${route.operationId} body: ${bodies.errorsText(bodies.errors)}`);
      }
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in === "header") continue;
        if (parameter.required)
          assert.notEqual(parameter.example, undefined, `${route.operationId} ${parameter.name}`);
        if (parameter.example === undefined) continue;
        const valid = parameters.validate(parameter.schema, parameter.example);
        assert.ok(
          valid,
          `${route.operationId} ${parameter.name}: ${parameters.errorsText(parameters.errors)}`,
        );
      }

      const url = new URL(server.url + route.path.replace("{id}", example.id ?? ""));
      for (const [name, value] of Object.entries(example.query ?? {})) url.searchParams.set(name, value);
      const response = await fetch(url, {
        method: route.method.toUpperCase(),
        headers: {
          authorization: "Bearer key-a",
          ...(example.body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(example.body === undefined ? {} : { body: JSON.stringify(example.body) }),
      });
      const answer = (await response.json()) as unknown;
      // An example naming a memory, job or trace by id meets an empty store: not found, never refused.
      const accepted = response.status < 300 || (example.id !== undefined && response.status === 404);
      assert.ok(accepted, `${route.operationId} answered ${response.status}: ${JSON.stringify(answer)}`);
      const documented = operation.responses[String(response.status)]?.content?.["application/json"]?.schema;
      assert.ok(documented, `${route.operationId}: status ${response.status} is documented`);
      const shaped = bodies.validate(documented, answer);
      assert.ok(shaped, `${route.operationId} answer: ${bodies.errorsText(bodies.errors)}`);
    }
  });
});
