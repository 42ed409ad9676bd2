/** Decides how a bundle runs: imported (a plain JS/TS module) or launched (anything else). */
import { statSync } from "node:fs";
import { extname } from "node:path";

export type BundleLaunch =
  | { readonly kind: "import" }
  | { readonly kind: "launch"; readonly command: string; readonly args: readonly string[] };

const importable = new Set([".js", ".mjs", ".ts", ".mts"]);
/** Scripts that are not executable still launch through their interpreter. */
const interpreters: Record<string, string> = { ".py": "python3", ".sh": "sh" };

/** Throws (with the file system's reason) when the path does not exist. */
export function bundleKind(path: string): BundleLaunch {
  const stats = statSync(path);
  if (!stats.isFile()) throw new Error(`${path} is not a file`);
  const executable = (stats.mode & 0o111) !== 0;
  const extension = extname(path).toLowerCase();
  if (!executable && importable.has(extension)) return { kind: "import" };
  if (executable) return { kind: "launch", command: path, args: [] };
  const interpreter = interpreters[extension];
  if (interpreter !== undefined) return { kind: "launch", command: interpreter, args: [path] };
  throw new Error(
    `${path} is neither a JavaScript module nor executable (chmod +x it, or give it a .py/.sh/.js extension)`,
  );
}
