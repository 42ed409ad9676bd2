/** The prompt's contract and the bindings' real types must be the same types, member for member. */
import assert from "node:assert/strict";
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
