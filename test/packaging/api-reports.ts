/**
 * The public surface of every package, as API Extractor reports it from the built `.d.ts`: one report per
 * export entry, checked in as `packages/<name>/api/<entry>.api.md`. The consumer test compares the
 * reports of the packages it builds with the checked-in ones, so a surface that changes without its
 * report fails; `npm run api-report` builds the packages and writes the reports anew.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import {
  CompilerState,
  Extractor,
  ExtractorConfig,
  ExtractorLogLevel,
  type IConfigFile,
} from "@microsoft/api-extractor";

export interface ApiReport {
  /** Where the report is kept, relative to the repository root. */
  readonly file: string;
  readonly text: string;
}

const compilerOptions = {
  module: "nodenext",
  moduleResolution: "nodenext",
  target: "es2024",
  lib: ["esnext", "dom"],
  types: ["node"],
  strict: true,
  skipLibCheck: true,
};
const quiet = { logLevel: ExtractorLogLevel.None, addToApiReportFile: false };

/** `"."` → `index`, `"./ai-sdk"` → `ai-sdk`. */
function entryName(subpath: string): string {
  return subpath === "." ? "index" : subpath.slice(2).replaceAll("/", "-");
}

function configFor(
  directory: string,
  declarations: string,
  reportName: string,
  scratch: string,
): ExtractorConfig {
  const configObject: IConfigFile = {
    projectFolder: directory,
    mainEntryPointFilePath: declarations,
    compiler: { overrideTsconfig: { compilerOptions } },
    apiReport: {
      enabled: true,
      reportFolder: scratch,
      reportTempFolder: scratch,
      reportFileName: reportName,
    },
    docModel: { enabled: false },
    dtsRollup: { enabled: false },
    tsdocMetadata: { enabled: false },
    messages: {
      extractorMessageReporting: { default: quiet },
      tsdocMessageReporting: { default: quiet },
      compilerMessageReporting: { default: { logLevel: ExtractorLogLevel.Error } },
    },
  };
  return ExtractorConfig.prepare({
    configObject,
    configObjectFullPath: undefined,
    packageJsonFullPath: path.join(directory, "package.json"),
  });
}

/** The reports of one built package (its staging directory holds `package.json` and `dist/`). */
export function apiReportsOf(name: string, directory: string): ApiReport[] {
  const manifest = JSON.parse(readFileSync(path.join(directory, "package.json"), "utf8")) as {
    exports: Record<string, { types?: string }>;
  };
  const entries = Object.entries(manifest.exports).flatMap(([subpath, target]) =>
    target.types === undefined
      ? []
      : [{ name: entryName(subpath), declarations: path.join(directory, target.types) }],
  );
  const scratch = mkdtempSync(path.join(tmpdir(), "tackle-api-report-"));
  try {
    const configs = entries.map((entry) => ({
      entry,
      config: configFor(directory, entry.declarations, entry.name, scratch),
    }));
    const [first] = configs;
    if (first === undefined) return [];
    // One TypeScript program for all of the package's entries.
    const compilerState = CompilerState.create(first.config, {
      additionalEntryPoints: configs.map(({ entry }) => entry.declarations),
    });
    return configs.map(({ entry, config }) => {
      const errors: string[] = [];
      Extractor.invoke(config, {
        localBuild: true,
        compilerState,
        messageCallback: (message) => {
          if (message.logLevel === ExtractorLogLevel.Error) errors.push(message.text);
          message.handled = true;
        },
      });
      if (errors.length > 0) throw new Error(`API Extractor on ${name} ${entry.name}: ${errors.join("\n")}`);
      const text = readFileSync(path.join(scratch, `${entry.name}.api.md`), "utf8");
      return { file: path.join("packages", name, "api", `${entry.name}.api.md`), text };
    });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
