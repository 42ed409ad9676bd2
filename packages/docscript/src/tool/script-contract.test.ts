/** The prompt's contract and the bindings' real types must be the same types, member for member. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { scriptSurface } from "./script-api.ts";
import { scriptContract } from "./script-contract.ts";

const apiPath = fileURLToPath(new URL("./script-api.ts", import.meta.url));

/** Type-checks the contract against script-api.ts; returns the diagnostics of the check file. */
function contractDiagnostics(contract: string): string[] {
  const checkPath = fileURLToPath(new URL("./__contract-check__.ts", import.meta.url));
  const source = `import type * as Api from ${JSON.stringify(apiPath)};
${contract}
type Equal<X, Y> = (<T>() => T extends X ? 1 : 2) extends (<T>() => T extends Y ? 1 : 2) ? true : false;
export const entitiesMatch: Equal<typeof entities, Api.ScriptEntities> = true;
export const relationsMatch: Equal<typeof relations, Api.ScriptRelations> = true;
export const consoleMatch: Equal<typeof console, Api.ScriptConsole> = true;
export const entityMatch: Equal<Entity, Api.Entity> = true;
export const relationMatch: Equal<Relation, Api.Relation> = true;
export const opMatch: Equal<UpdateOp, Api.UpdateOp> = true;
export const fieldMatch: Equal<FieldDeclaration, Api.FieldDeclaration> = true;
export const materializedMatch: Equal<Materialized, Api.Materialized> = true;
`;
  const options: ts.CompilerOptions = {
    strict: true,
    exactOptionalPropertyTypes: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    allowImportingTsExtensions: true,
    types: [],
    lib: ["lib.es2022.d.ts"],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, language, ...rest) =>
    fileName === checkPath
      ? ts.createSourceFile(fileName, source, language)
      : getSourceFile(fileName, language, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (fileName) => fileName === checkPath || fileExists(fileName);
  const program = ts.createProgram([checkPath], options, host);
  return ts
    .getPreEmitDiagnostics(program, program.getSourceFile(checkPath))
    .map((diagnostic) => ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
}

test("the contract in the prompt states exactly the bindings' real types", () => {
  assert.deepEqual(contractDiagnostics(scriptContract), []);
});

test("the check notices a contract that drifts from the real types", () => {
  const drifted = scriptContract.replace(
    "get(entityId: string): Entity | null;",
    "get(entityId: string): Entity;",
  );
  assert.notEqual(drifted, scriptContract);
  assert.ok(contractDiagnostics(drifted).length > 0);
  const missing = scriptContract.replace(/ {2}unlink\(relationId: string\): void;\n/, "");
  assert.notEqual(missing, scriptContract);
  assert.ok(contractDiagnostics(missing).length > 0);
});

const dispatcherPath = fileURLToPath(new URL("./run-bindings.ts", import.meta.url));

/** Type-checks the edit-script dispatcher against `api` standing in for script-api.ts; its diagnostics. */
function dispatcherDiagnostics(api: string): string[] {
  const options: ts.CompilerOptions = {
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    customConditions: ["@tackle/source"],
    allowImportingTsExtensions: true,
    types: ["node"],
    lib: ["lib.esnext.d.ts", "lib.dom.d.ts"],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, language, ...rest) =>
    fileName === apiPath
      ? ts.createSourceFile(fileName, api, language)
      : getSourceFile(fileName, language, ...rest);
  const program = ts.createProgram([dispatcherPath], options, host);
  return ts
    .getPreEmitDiagnostics(program, program.getSourceFile(dispatcherPath))
    .map((diagnostic) => ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
}

test("the real bindings are type-checked against the contract's types, parameters and returns", () => {
  const api = readFileSync(apiPath, "utf8");
  assert.deepEqual(dispatcherDiagnostics(api), []);
  const drifts = [
    // A return the bindings do not give: they answer null for a missing entity.
    ["get(entityId: string): Entity | null;", "get(entityId: string): Entity | undefined;"],
    // A parameter the bindings do not take.
    ["unlink(relationId: string): void;", "unlink(relationId: string, reason: string): void;"],
    // A parameter type narrower than what the binding needs.
    [
      "of(entityId: string, relationKind?: string, ends?: { first?: number; last?: number }): Relation[];",
      "of(entityId: number): Relation[];",
    ],
    // A return shape the bindings do not build.
    [
      "declareFields(entityKind: string): FieldDeclaration[];",
      "declareFields(entityKind: string): string[];",
    ],
  ] as const;
  for (const [from, to] of drifts) {
    const drifted = api.replace(from, to);
    assert.notEqual(drifted, api, from);
    assert.ok(dispatcherDiagnostics(drifted).length > 0, `the dispatcher still type-checks after ${to}`);
  }
});

test("every method the contract declares is one the sandbox builds, and no other", () => {
  const declared = (binding: string) => {
    const block =
      new RegExp(`declare const ${binding}: \\{([\\s\\S]*?)\\n\\};`).exec(scriptContract)?.[1] ?? "";
    return [...block.matchAll(/^ {2}(\w+)\(/gm)].map((match) => match[1]).sort();
  };
  assert.deepEqual(declared("entities"), Object.keys(scriptSurface.entities).sort());
  assert.deepEqual(declared("relations"), Object.keys(scriptSurface.relations).sort());
  assert.deepEqual(scriptSurface.entities.materialize, "async");
});
