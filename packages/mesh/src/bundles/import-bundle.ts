/** Imports a JavaScript bundle and turns its default export into tools (the bundle contract, ADR 0202). */
import { registerHooks } from "node:module";
import { pathToFileURL } from "node:url";
import type { AnyTool, Logger, ToolSet } from "@tackle/core";

/** What a bundle's default-export function receives. */
export interface BundleContext {
  readonly module: string;
  readonly node: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly logger: Logger;
}

export type BundleTools = readonly AnyTool[] | ToolSet;

/** The shapes a bundle's default export may take. */
export type BundleExport =
  | BundleTools
  | ((
      context: BundleContext,
    ) =>
      | BundleTools
      | { tools: BundleTools; close?: () => Promise<void> }
      | Promise<BundleTools | { tools: BundleTools; close?: () => Promise<void> }>);

export interface ImportedBundle {
  readonly tools: readonly AnyTool[];
  readonly close?: () => Promise<void>;
}

/**
 * Packages the runtime lends to bundles: a bundle anywhere on disk (with no node_modules of its own)
 * imports `@tackle/core` and `zod` and gets the runtime's copies. A bundle that installed its own
 * copy keeps it; only an import that would fail is answered from the runtime.
 */
export const PROVIDED_PACKAGES = ["@tackle/core", "zod"] as const;

let hooksInstalled = false;

/** Installs, once per process, the resolve hook that lends `PROVIDED_PACKAGES` to bundles. */
export function provideRuntimePackages(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  registerHooks({
    resolve(specifier, context, nextResolve) {
      try {
        return nextResolve(specifier, context);
      } catch (error) {
        const provided = PROVIDED_PACKAGES.some(
          (name) => specifier === name || specifier.startsWith(`${name}/`),
        );
        if (!provided) throw error;
        return { url: import.meta.resolve(specifier), shortCircuit: true };
      }
    },
  });
}

export async function importBundle(path: string, context: BundleContext): Promise<ImportedBundle> {
  provideRuntimePackages();
  const loaded = (await import(pathToFileURL(path).href)) as { default?: unknown };
  let exported: unknown = loaded.default;
  if (exported === undefined) {
    throw new Error(
      "has no default export (export default an array of tools, a ToolSet, or a function returning one)",
    );
  }
  if (typeof exported === "function") exported = await exported(context);
  if (isToolList(exported) || isToolSet(exported)) return { tools: toolsOf(exported) };
  if (typeof exported === "object" && exported !== null && "tools" in exported) {
    const { tools, close } = exported as { tools: unknown; close?: unknown };
    if (isToolList(tools) || isToolSet(tools)) {
      if (close !== undefined && typeof close !== "function") throw new Error("its close is not a function");
      return {
        tools: toolsOf(tools),
        ...(close === undefined ? {} : { close: close as () => Promise<void> }),
      };
    }
  }
  throw new Error(
    "its default export is not an array of tools, a ToolSet, or a function returning one (or { tools, close })",
  );
}

function isTool(value: unknown): value is AnyTool {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as AnyTool).name === "string" &&
    typeof (value as AnyTool).execute === "function" &&
    typeof (value as AnyTool).inputJsonSchema === "object"
  );
}

function isToolList(value: unknown): value is readonly AnyTool[] {
  return Array.isArray(value) && value.every(isTool);
}

function isToolSet(value: unknown): value is ToolSet {
  return (
    typeof value === "object" &&
    value !== null &&
    Array.isArray((value as ToolSet).tools) &&
    typeof (value as ToolSet).call === "function"
  );
}

function toolsOf(value: BundleTools): readonly AnyTool[] {
  return isToolSet(value) ? value.tools : value;
}
