/** The modules `npm start` (`tackle serve --builtin`) serves: one list, `module=path` entries. */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

export interface ModuleEntry {
  readonly module: string;
  readonly path: string;
}

// Source runs as .ts, a build as .js: the bundles are named with this file's own extension.
const extension = import.meta.url.endsWith(".ts") ? ".ts" : ".js";
const built = extension === ".js";

/** Module name and path relative to this folder; memory and docscript join when their bundles exist. */
const builtinCandidates: readonly { module: string; path: string; optional: boolean }[] = [
  { module: "demo", path: `./demo${extension}`, optional: false },
  {
    module: "memory",
    path: `../../../memory/${built ? "dist" : "src"}/module/bundle${extension}`,
    optional: true,
  },
  {
    module: "docscript",
    path: `../../../docscript/${built ? "dist" : "src"}/module/bundle${extension}`,
    optional: true,
  },
];

/** The built-in modules present in this installation, as absolute paths. */
export function builtinModules(): ModuleEntry[] {
  return builtinCandidates
    .map((candidate) => ({ ...candidate, path: fileURLToPath(new URL(candidate.path, import.meta.url)) }))
    .filter((candidate) => !candidate.optional || existsSync(candidate.path))
    .map(({ module, path }) => ({ module, path }));
}

/** The same list in `MESH_TOOL_MODULES` form (`demo=/…/demo.ts,memory=/…`). */
export function builtinModulesSetting(): string {
  return builtinModules()
    .map((entry) => `${entry.module}=${entry.path}`)
    .join(",");
}
