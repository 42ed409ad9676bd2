/**
 * Builds and packs every public package the way a release would, without touching the checkout: the
 * packages' sources are copied into a scratch workspace whose node_modules links the real dependencies
 * (and `@tackle/*` to the scratch copies), each is compiled by its own tsconfig.build.json into its
 * scratch `dist/`, and `npm pack` makes the tarball a user would install.
 */
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, symlinkSync } from "node:fs";
import path from "node:path";
import { underLoadMs } from "@tackle/test-support";

export const repositoryRoot = path.join(import.meta.dirname, "..", "..");

/** The public packages, in build order (a package's Tackle dependencies come before it). */
export const publicPackages = ["core", "storage", "durable", "mesh", "memory", "docscript", "cli"] as const;
export type PublicPackage = (typeof publicPackages)[number];

export interface PackedPackage {
  readonly name: string;
  readonly folder: PublicPackage;
  readonly directory: string;
  readonly tarball: string;
}

const copied = new Set([
  "package.json",
  "tsconfig.build.json",
  "README.md",
  "LICENSE",
  "src",
  "bin",
  "launcher",
]);

function linkDependencies(workspace: string): void {
  const realModules = path.join(repositoryRoot, "node_modules");
  const modules = path.join(workspace, "node_modules");
  mkdirSync(path.join(modules, "@tackle"), { recursive: true });
  for (const entry of readdirSync(realModules)) {
    if (entry === "@tackle" || entry === ".bin" || entry.startsWith(".")) continue;
    symlinkSync(path.join(realModules, entry), path.join(modules, entry));
  }
  for (const name of publicPackages)
    symlinkSync(path.join(workspace, "packages", name), path.join(modules, "@tackle", name));
}

function stagePackage(workspace: string, name: PublicPackage): string {
  const source = path.join(repositoryRoot, "packages", name);
  const target = path.join(workspace, "packages", name);
  mkdirSync(target, { recursive: true });
  for (const entry of readdirSync(source)) {
    if (!copied.has(entry)) continue;
    cpSync(path.join(source, entry), path.join(target, entry), {
      recursive: true,
      filter: (file) => !file.endsWith(".test.ts") && !file.split(path.sep).includes("fixtures"),
    });
  }
  // A package's own nested dependencies (versions that differ from the hoisted ones).
  const nested = path.join(source, "node_modules");
  if (existsSync(nested)) symlinkSync(nested, path.join(target, "node_modules"));
  return target;
}

export interface BuiltPackage {
  readonly folder: PublicPackage;
  /** The staging copy, with its `dist/`. */
  readonly directory: string;
}

/** Builds every public package in a scratch workspace under `into`; the checkout is not touched. */
export function buildPublicPackages(into: string): BuiltPackage[] {
  const workspace = path.join(into, "workspace");
  mkdirSync(path.join(workspace, "packages"), { recursive: true });
  cpSync(path.join(repositoryRoot, "tsconfig.base.json"), path.join(workspace, "tsconfig.base.json"));
  linkDependencies(workspace);
  const tsc = path.join(repositoryRoot, "node_modules", "typescript", "bin", "tsc");
  return publicPackages.map((folder) => {
    const directory = stagePackage(workspace, folder);
    try {
      execFileSync(process.execPath, [tsc, "-p", path.join(directory, "tsconfig.build.json")], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
        timeout: underLoadMs(600_000),
      });
    } catch (error) {
      throw new Error(
        `building ${folder} failed:\n${(error as { stdout?: string }).stdout ?? String(error)}`,
      );
    }
    return { folder, directory };
  });
}

/** Builds and packs every public package into `into/tarballs`; `into` is a scratch directory. */
export function packPublicPackages(into: string): PackedPackage[] {
  const tarballs = path.join(into, "tarballs");
  mkdirSync(tarballs, { recursive: true });
  return buildPublicPackages(into).map(({ folder, directory }) => {
    const output = execFileSync("npm", ["pack", "--json", "--pack-destination", tarballs], {
      cwd: directory,
      encoding: "utf8",
      timeout: underLoadMs(120_000),
      env: { ...process.env, npm_config_loglevel: "error" },
    });
    const [result] = JSON.parse(output) as { filename: string; name: string }[];
    if (result === undefined) throw new Error(`npm pack printed nothing for ${folder}`);
    return { name: result.name, folder, directory, tarball: path.join(tarballs, result.filename) };
  });
}
