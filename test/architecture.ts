/**
 * The dependency rules of the workspace, checked from the source: every import, re-export, dynamic
 * `import()` and `require` in `packages/<name>/src` and `packages/<name>/test*`, parsed with the
 * TypeScript compiler's own pre-processor.
 *
 * - `core` and `storage` import no package of ours; `mesh` imports only `core`; `durable`, `memory` and
 *   `docscript` import only `core` and `storage`; nothing imports the cli (it composes the others).
 * - Another package is reached only by its name and an entry of its `exports`: never by a relative path
 *   out of the importing package, never by a string that spells a path into another package's
 *   `src`/`dist`, never by an unexported subpath.
 * - `@tackle/test-support` only from test code (`*.test.ts`, `test*` folders, fixtures).
 * - A package's own `package.json` may declare only the workspace packages it is allowed to import.
 * Tests are held to the same rules as sources: a test that needs another module package is a sign the
 * code under test reaches too far.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";

/** Which workspace packages each package may import (besides itself). */
export const allowedImports: Readonly<Record<string, readonly string[]>> = {
  core: [],
  storage: [],
  mesh: ["core"],
  durable: ["core", "storage"],
  memory: ["core", "storage"],
  docscript: ["core", "storage"],
  cli: ["core", "mesh", "durable", "memory", "docscript"],
};

export interface Violation {
  readonly file: string;
  readonly line: number;
  readonly specifier: string;
  readonly rule: string;
}

const scope = "@tackle/";
const sourceExtensions = /\.(ts|mts|cts|tsx|js|mjs|cjs)$/;

/** Every violation in the workspace at `root`, sorted by file and line. */
export function checkArchitecture(root: string): Violation[] {
  const packagesDir = join(root, "packages");
  const packages = readdirSync(packagesDir).filter((name) => isFile(join(packagesDir, name, "package.json")));
  const manifests = new Map(packages.map((name) => [name, readManifest(join(packagesDir, name))]));
  const byPackageName = new Map([...manifests].map(([dir, manifest]) => [manifest.name, dir]));
  const violations: Violation[] = [];

  for (const name of packages) {
    const packageDir = join(packagesDir, name);
    const allowed = allowedImports[name];
    const manifest = manifests.get(name);
    if (allowed === undefined) {
      violations.push({
        file: relative(root, join(packageDir, "package.json")),
        line: 1,
        specifier: manifest?.name ?? name,
        rule: `packages/${name} has no entry in the architecture rules: add one to test/architecture.ts`,
      });
      continue;
    }
    for (const dependency of Object.keys({ ...manifest?.dependencies, ...manifest?.peerDependencies })) {
      const target = byPackageName.get(dependency);
      if (target !== undefined && target !== name && !allowed.includes(target)) {
        violations.push({
          file: relative(root, join(packageDir, "package.json")),
          line: 1,
          specifier: dependency,
          rule: `${name} may not depend on ${target} (allowed: ${allowed.join(", ") || "none"})`,
        });
      }
    }
    const roots = readdirSync(packageDir)
      .filter((entry) => entry === "src" || entry.startsWith("test"))
      .map((entry) => join(packageDir, entry))
      .filter((path) => statSync(path).isDirectory());
    for (const file of roots.flatMap(listSources)) {
      const text = readFileSync(file, "utf8");
      const isTest =
        /\.test\.[cm]?[jt]sx?$/.test(file) ||
        relative(packageDir, file).startsWith("test") ||
        file.includes(`${sep}fixtures${sep}`);
      const imported = ts.preProcessFile(text, true, true).importedFiles;
      for (const { fileName: specifier, pos } of imported) {
        const line = lineOf(text, pos);
        const where = { file: relative(root, file), line, specifier };
        const rule = judgeImport({
          name,
          packageDir,
          file,
          specifier,
          isTest,
          manifests,
          byPackageName,
          allowed,
        });
        if (rule !== undefined) violations.push({ ...where, rule });
      }
      // A path spelled as a string (for `new URL`, `import.meta.resolve`, a module list) reaches into
      // another package as surely as an import does.
      for (const match of text.matchAll(/["'`]((?:\.\.\/)+)([a-z-]+)\//g)) {
        const target = resolve(dirname(file), match[1] ?? "", match[2] ?? "");
        const targetPackage = relative(packagesDir, target);
        if (packages.includes(targetPackage) && targetPackage !== name) {
          violations.push({
            file: relative(root, file),
            line: lineOf(text, match.index ?? 0),
            specifier: match[0].slice(1),
            rule: `a path into packages/${targetPackage}: reach another package through its exports`,
          });
        }
      }
    }
  }
  return violations.sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line);
}

interface ImportContext {
  readonly name: string;
  readonly packageDir: string;
  readonly file: string;
  readonly specifier: string;
  readonly isTest: boolean;
  readonly manifests: ReadonlyMap<string, Manifest>;
  readonly byPackageName: ReadonlyMap<string, string>;
  readonly allowed: readonly string[];
}

function judgeImport(context: ImportContext): string | undefined {
  const { name, packageDir, file, specifier, isTest, manifests, byPackageName, allowed } = context;
  if (specifier.startsWith(".")) {
    const target = resolve(dirname(file), specifier);
    if (target !== packageDir && !target.startsWith(packageDir + sep)) {
      return `a relative path out of packages/${name}: import another package by its name`;
    }
    return undefined;
  }
  if (specifier === "@tackle/test-support" || specifier.startsWith("@tackle/test-support/")) {
    return isTest ? undefined : "@tackle/test-support is for tests only";
  }
  if (!specifier.startsWith(scope)) return undefined;
  const [packageName, subpath] = splitSpecifier(specifier);
  const target = byPackageName.get(packageName);
  if (target === undefined) return `${packageName} is not a package of this workspace`;
  if (target === "cli" && name !== "cli") return "nothing imports the cli: it composes the other packages";
  if (target !== name && !allowed.includes(target)) {
    return `${name} may not import ${target} (allowed: ${allowed.join(", ") || "no package of ours"})`;
  }
  const exports = manifests.get(target)?.exports;
  if (!exportsSubpath(exports, subpath)) {
    return `${packageName} does not export "${subpath}": import one of its exports`;
  }
  return undefined;
}

interface Manifest {
  readonly name: string;
  readonly exports?: unknown;
  readonly dependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
}

function readManifest(packageDir: string): Manifest {
  return JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as Manifest;
}

/** `@tackle/memory/server` → [`@tackle/memory`, `./server`]. */
function splitSpecifier(specifier: string): [string, string] {
  const [scopeName, packageName, ...rest] = specifier.split("/");
  return [`${scopeName}/${packageName}`, rest.length > 0 ? `./${rest.join("/")}` : "."];
}

function exportsSubpath(exports: unknown, subpath: string): boolean {
  if (exports === undefined) return subpath === ".";
  if (typeof exports === "string" || Array.isArray(exports)) return subpath === ".";
  const keys = Object.keys(exports as object);
  if (!keys.some((key) => key.startsWith("."))) return subpath === "."; // conditions only
  return keys.some((key) =>
    key.includes("*")
      ? subpath.startsWith(key.slice(0, key.indexOf("*"))) &&
        subpath.endsWith(key.slice(key.indexOf("*") + 1))
      : key === subpath,
  );
}

function listSources(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) {
      return entry.name === "node_modules" || entry.name === "dist" ? [] : listSources(path);
    }
    return sourceExtensions.test(entry.name) && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function lineOf(text: string, position: number): number {
  let line = 1;
  for (let index = 0; index < position && index < text.length; index++) if (text[index] === "\n") line++;
  return line;
}

/** `file:line  specifier  — rule`, one per line. */
export function formatViolations(violations: readonly Violation[]): string {
  return violations.map((v) => `${v.file}:${v.line}  ${v.specifier}  — ${v.rule}`).join("\n");
}
