/**
 * The credential side of `tackle mesh` (ADR 0209): `init` creates the issuer's folder, `issue --creds`
 * writes a node's credential, `issue-client` a client's, and `revoke` cuts credentials off through
 * the servers' resolver.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  connectMesh,
  initOperatorHome,
  issueClientCredential,
  issueNodeCredential,
  listMemberships,
  type ModuleReach,
  type NatsConnection,
  type OperatorHome,
  openOperatorHome,
  pushAccount,
  readCatalogue,
  recordIssued,
  recordRevoked,
  revokeCredential,
} from "@tackle/mesh";
import { tackleHome } from "../config/tackle-home.ts";
import { CliError } from "../program/cli-error.ts";
import { readMeshConfig } from "../program/open-tool-source.ts";
import type { ProgramContext } from "../program/program-context.ts";

/** The issuer's folder: `--home`, else `$TACKLE_HOME/mesh`. */
export function meshHome(context: ProgramContext, home: string | undefined): string {
  return home ?? join(tackleHome(context.env), "mesh");
}

export async function initHome(context: ProgramContext, directory: string): Promise<void> {
  const home = await initOperatorHome(directory);
  context.stdout.write(
    [
      `mesh authority created in ${home.directory} (keep it private: it issues credentials)`,
      `  start the broker:   nats-server -js -c ${home.serverConfigFile}`,
      `  as the issuer:      MESH_BROKER_FILE=${home.issuerCredsFile} tackle mesh issue <node> <module> --creds <file>`,
      "",
    ].join("\n"),
  );
}

/** What each module reaches: its prefix from the catalogue, its seats from its memberships. */
async function reachOf(connection: NatsConnection, modules: readonly string[]): Promise<ModuleReach[]> {
  const catalogue = await readCatalogue(connection, { onInvalid: () => {} });
  const memberships = await listMemberships(connection, {}, { onInvalid: () => {} });
  return modules.map((module) => {
    const record = catalogue.find((entry) => entry.module === module);
    if (record === undefined)
      throw new CliError(
        "invalid_arguments",
        `Module ${module} is not in the mesh's catalogue: issue it first`,
      );
    const seats: Record<string, string> = {};
    for (const membership of memberships)
      if (membership.module === module) Object.assign(seats, membership.seats);
    return { module, prefix: record.prefix, seats };
  });
}

/** Writes a node's credential for every module it holds now, and registers it. */
export async function writeNodeCredential(
  context: ProgramContext,
  connection: NatsConnection,
  options: { readonly node: string; readonly module: string; readonly creds: string; readonly home: string },
): Promise<void> {
  const home = openOperatorHome(options.home);
  const held = await listMemberships(connection, { node: options.node }, { onInvalid: () => {} });
  // The module just issued first: the credential's own module (a bare MESH_TOOL_MODULES path's).
  const modules = [
    options.module,
    ...held.map((record) => record.module).filter((name) => name !== options.module),
  ];
  const reach = await reachOf(connection, modules);
  const credential = await issueNodeCredential(home.authority, { node: options.node, modules: reach });
  writeFileSync(options.creds, credential.creds, { mode: 0o600 });
  recordIssued(home, credential, { node: options.node, modules });
  context.stderr.write(
    `wrote ${options.creds}: node ${options.node}'s credential for ${modules.join(", ")} (${credential.publicKey})\n`,
  );
}

export async function writeClientCredential(
  context: ProgramContext,
  connection: NatsConnection,
  options: {
    readonly name: string;
    readonly modules: readonly string[];
    readonly creds: string;
    readonly home: string;
  },
): Promise<void> {
  const home = openOperatorHome(options.home);
  const reach = await reachOf(connection, options.modules);
  const credential = await issueClientCredential(home.authority, { name: options.name, modules: reach });
  writeFileSync(options.creds, credential.creds, { mode: 0o600 });
  recordIssued(home, credential, { modules: options.modules });
  context.stdout.write(
    `wrote ${options.creds}: ${options.name} may call ${options.modules.join(", ")} (${credential.publicKey})\n`,
  );
}

/**
 * Revokes credentials on the mesh's account and pushes it to the servers over the system account:
 * each named key, or every live node credential of `node` that reaches `module`. Returns the keys.
 */
export async function revokeCredentials(
  context: ProgramContext,
  options: {
    readonly home: string;
    readonly publicKeys?: readonly string[];
    readonly node?: string;
    readonly module?: string;
  },
): Promise<string[]> {
  const home: OperatorHome = openOperatorHome(options.home);
  const keys = [...(options.publicKeys ?? [])];
  if (options.node !== undefined && options.module !== undefined) {
    for (const record of home.issued) {
      if (record.revokedAt !== undefined || record.role !== "node" || record.node !== options.node) continue;
      if (record.modules.includes(options.module)) keys.push(record.publicKey);
    }
  }
  if (keys.length === 0) return [];
  let authority = home.authority;
  for (const key of keys) authority = revokeCredential(authority, key);
  const config = readMeshConfig(context.env);
  const connection = await connectMesh({
    servers: config.brokerUrl ?? "nats://127.0.0.1:4222",
    credsFile: home.systemCredsFile,
    name: "tackle mesh revoke",
  });
  try {
    await pushAccount(connection, authority);
  } finally {
    await connection.close();
  }
  recordRevoked(home, authority, keys);
  return keys;
}
