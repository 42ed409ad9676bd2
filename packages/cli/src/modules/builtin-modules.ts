/** The modules `npm start` (`tackle serve --builtin`) serves: one list, `module=path` entries. */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

export interface ModuleEntry {
  readonly module: string;
  readonly path: string;
}

// Source runs as .ts, a build as .js: the demo bundle is named with this file's own extension.
const extension = import.meta.url.endsWith(".ts") ? ".ts" : ".js";

/**
 * The built-in modules: the demo beside this file, and memory and docscript through their packages'
 * `./module` export (the source under the `@tackle/source` condition, the build otherwise). Those two
 * join when their package is installed and its bundle exists.
 */
const builtinCandidates: readonly { module: string; url: () => string; optional: boolean }[] = [
  { module: "demo", url: () => new URL(`./demo${extension}`, import.meta.url).href, optional: false },
  { module: "memory", url: () => import.meta.resolve("@tackle/memory/module"), optional: true },
  { module: "docscript", url: () => import.meta.resolve("@tackle/docscript/module"), optional: true },
];

/** The built-in modules present in this installation, as absolute paths. */
export function builtinModules(): ModuleEntry[] {
  const entries: ModuleEntry[] = [];
  for (const candidate of builtinCandidates) {
    let path: string;
    try {
      path = fileURLToPath(candidate.url());
    } catch (error) {
      if (candidate.optional) continue; // the package is not installed
      throw error;
    }
    if (candidate.optional && !existsSync(path)) continue; // installed, not built
    entries.push({ module: candidate.module, path });
  }
  return entries;
}

/** The same list in `MESH_TOOL_MODULES` form (`demo=/…/demo.ts,memory=/…`). */
export function builtinModulesSetting(): string {
  return builtinModules()
    .map((entry) => `${entry.module}=${entry.path}`)
    .join(",");
}
