/** `tackle mesh issue | revoke | ls`: write and read the membership and catalogue records on the broker. */

import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  CATALOGUE_BUCKET,
  connectMesh,
  issueMembership,
  listMemberships,
  MEMBERSHIP_BUCKET,
  MeshConfigError,
  readCatalogue,
  revokeMembership,
} from "@tackle/mesh";
import type { Command } from "commander";
import { CliError } from "../program/cli-error.ts";
import {
  hasBroker,
  isNoJetStream,
  noJetStream,
  readMeshConfig,
  withBroker,
} from "../program/open-tool-source.ts";
import type { ProgramContext } from "../program/program-context.ts";
import {
  initHome,
  meshHome,
  revokeCredentials,
  writeClientCredential,
  writeNodeCredential,
} from "./mesh-credential-commands.ts";

type Connection = Awaited<ReturnType<typeof connectMesh>>;

export function addMeshCommand(program: Command, context: ProgramContext): void {
  const mesh = program
    .command("mesh")
    .description(
      "Administer the mesh on MESH_BROKER_URL / MESH_BROKER_FILE: issue, revoke and list module memberships and credentials",
    );
  addInitCommand(mesh, context);
  addIssueCommand(mesh, context);
  addIssueClientCommand(mesh, context);
  addRevokeCommand(mesh, context);
  addListCommand(mesh, context);
}

/** `tackle mesh init`: the authority and its server configuration. */
function addInitCommand(mesh: Command, context: ProgramContext): void {
  mesh
    .command("init")
    .description(
      "Create the mesh's authority (operator, account, system account) in a private folder, with the nats-server configuration that trusts it and the issuer's credential",
    )
    .option("--home <dir>", "the issuer's folder (default $TACKLE_HOME/mesh)")
    .action(async (options: { home?: string }) => {
      await initHome(context, meshHome(context, options.home));
    });
}

/** `tackle mesh issue`: a module on a node, and optionally its credential. */
function addIssueCommand(mesh: Command, context: ProgramContext): void {
  mesh
    .command("issue")
    .description(
      "Issue a module on a node (its runtime serves it at once) and list the module in the catalogue",
    )
    .argument("<node>", "the node's name (its MESH_NODE)")
    .argument("<module>", "the module's name")
    .option("--prefix <subject>", "the subject prefix its tools answer on (default tackle.tools.<module>)")
    .option("--seat <seat[=subject]>", "a seat the module holds on that node (repeatable)", collect, [])
    .option("--description <text>", "what the module is for, shown in the catalogue")
    .option(
      "--creds <file>",
      "also write the node's credential (0600): its modules' subjects and nothing else's (needs tackle mesh init)",
    )
    .option("--home <dir>", "the issuer's folder (default $TACKLE_HOME/mesh)")
    .action(
      async (
        node: string,
        module: string,
        options: { prefix?: string; seat: string[]; description?: string; creds?: string; home?: string },
      ) => {
        const seats = Object.fromEntries(
          options.seat.map((seat) => {
            const equals = seat.indexOf("=");
            return equals === -1 ? [seat, undefined] : [seat.slice(0, equals), seat.slice(equals + 1)];
          }),
        );
        const record = await withConnection(context, async (connection) => {
          const issued = await issueMembership(connection, {
            node,
            module,
            seats,
            ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
            ...(options.description === undefined ? {} : { description: options.description }),
          });
          if (options.creds !== undefined) {
            const home = meshHome(context, options.home);
            await writeNodeCredential(context, connection, { node, module, creds: options.creds, home });
          }
          return issued;
        });
        context.stdout.write(`${JSON.stringify(record, null, 2)}\n`);
      },
    );
}

/** `tackle mesh issue-client`: a credential that may call the named modules. */
function addIssueClientCommand(mesh: Command, context: ProgramContext): void {
  mesh
    .command("issue-client")
    .description("Write a client's credential (0600) that may call the named modules and nothing else")
    .argument("<name>", "who holds it (the JWT's name)")
    .requiredOption("--call <module>", "a module it may call (repeatable)", collect, [])
    .requiredOption("--creds <file>", "where to write the credential")
    .option("--home <dir>", "the issuer's folder (default $TACKLE_HOME/mesh)")
    .action(async (name: string, options: { call: string[]; creds: string; home?: string }) => {
      if (options.call.length === 0)
        throw new CliError("invalid_arguments", "Name at least one module with --call", { exitCode: 2 });
      await withConnection(context, (connection) =>
        writeClientCredential(context, connection, {
          name,
          modules: options.call,
          creds: options.creds,
          home: meshHome(context, options.home),
        }),
      );
    });
}

/** `tackle mesh revoke`: a membership, the credentials that reach it, or one credential. */
function addRevokeCommand(mesh: Command, context: ProgramContext): void {
  mesh
    .command("revoke")
    .description(
      "Take a module's membership off a node (the catalogue drops the module when no node holds it) and revoke the node credentials that reach it; or, with --credential, revoke one credential",
    )
    .argument("[node]")
    .argument("[module]")
    .option(
      "--credential <key-or-file>",
      "revoke this credential (a user public key or a .creds file), effective on the servers at once",
      collect,
      [],
    )
    .option("--home <dir>", "the issuer's folder (default $TACKLE_HOME/mesh)")
    .action(
      async (
        node: string | undefined,
        module: string | undefined,
        options: { credential: string[]; home?: string },
      ) => {
        if (
          (node === undefined) !== (module === undefined) ||
          (node === undefined && options.credential.length === 0)
        )
          throw new CliError("invalid_arguments", "Name a node and a module, or --credential", {
            exitCode: 2,
          });
        const home = meshHome(context, options.home);
        if (node !== undefined && module !== undefined) {
          const revoked = await withConnection(context, (connection) =>
            revokeMembership(connection, { node, module }),
          );
          if (!revoked)
            throw new CliError("invalid_arguments", `No membership of module ${module} on node ${node}`);
          context.stdout.write(`revoked ${module} on ${node}\n`);
        }
        const publicKeys = options.credential.map(credentialKey);
        // Without an issuer's folder there are no issued credentials to cut off (memberships only).
        if (publicKeys.length === 0 && !existsSync(join(home, "authority.json"))) return;
        const keys = await revokeCredentials(context, {
          home,
          publicKeys,
          ...(node === undefined ? {} : { node }),
          ...(module === undefined ? {} : { module }),
        });
        for (const key of keys) context.stdout.write(`revoked credential ${key}\n`);
      },
    );
}

/** `tackle mesh ls`: memberships and the catalogue. */
function addListCommand(mesh: Command, context: ProgramContext): void {
  mesh
    .command("ls")
    .description("List memberships (node, module, subject prefix, seats) and the catalogue")
    .option("--node <node>", "only this node")
    .option("--module <module>", "only this module")
    .option(
      "--json",
      "print { memberships, catalogue, invalid } as JSON (invalid: records that do not parse)",
    )
    .action(async (options: { node?: string; module?: string; json?: boolean }) => {
      // A record that does not parse is named, and the good ones are still listed.
      const invalid: { bucket: string; key: string; message: string }[] = [];
      const { memberships, catalogue } = await withConnection(context, async (connection) => ({
        memberships: await listMemberships(
          connection,
          {
            ...(options.node === undefined ? {} : { node: options.node }),
            ...(options.module === undefined ? {} : { module: options.module }),
          },
          {
            onInvalid: (key, error) =>
              invalid.push({ bucket: MEMBERSHIP_BUCKET, key, message: error.message }),
          },
        ),
        catalogue: await readCatalogue(connection, {
          onInvalid: (key, error) => invalid.push({ bucket: CATALOGUE_BUCKET, key, message: error.message }),
        }),
      }));
      if (invalid.length > 0) {
        context.stderr.write(
          invalid.map((record) => `tackle: unreadable record ${record.message}\n`).join(""),
        );
        process.exitCode = 1;
      }
      if (options.json === true) {
        context.stdout.write(`${JSON.stringify({ memberships, catalogue, invalid }, null, 2)}\n`);
        return;
      }
      const lines = ["NODE\tMODULE\tPREFIX\tSEATS"];
      for (const record of memberships) {
        const seats = Object.entries(record.seats).map(([seat, subject]) => `${seat}=${subject}`);
        lines.push([record.node, record.module, record.prefix, seats.join(",") || "-"].join("\t"));
      }
      lines.push("", "CATALOGUE\tPREFIX\tDESCRIPTION");
      for (const record of catalogue)
        lines.push([record.module, record.prefix, record.description ?? ""].join("\t"));
      context.stdout.write(`${lines.join("\n")}\n`);
    });
}

/** A user public key as given, or the `sub` of the user JWT in a credentials file. */
function credentialKey(value: string): string {
  if (/^U[A-Z2-7]{55}$/.test(value)) return value;
  let text: string;
  try {
    text = readFileSync(value, "utf8");
  } catch (error) {
    throw new CliError(
      "invalid_arguments",
      `${value} is neither a user public key nor a readable credentials file`,
      {
        cause: error,
        exitCode: 2,
      },
    );
  }
  const jwt = /-----BEGIN NATS USER JWT-----\s*\n\s*([A-Za-z0-9_=.-]+)/.exec(text)?.[1];
  const payload = jwt?.split(".")[1];
  const subject =
    payload === undefined
      ? undefined
      : (JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { sub?: unknown }).sub;
  if (typeof subject !== "string")
    throw new CliError("invalid_arguments", `${value} is not a NATS credentials file`, { exitCode: 2 });
  return subject;
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

async function withConnection<T>(
  context: ProgramContext,
  work: (connection: Connection) => Promise<T>,
): Promise<T> {
  const config = readMeshConfig(context.env);
  if (!hasBroker(config)) {
    throw new CliError(
      "invalid_configuration",
      "tackle mesh needs a broker: set MESH_BROKER_URL or MESH_BROKER_FILE",
      { exitCode: 2 },
    );
  }
  const connection = await withBroker(config, () =>
    connectMesh({
      ...(config.brokerUrl === undefined ? {} : { servers: config.brokerUrl }),
      ...(config.brokerFile === undefined ? {} : { credsFile: config.brokerFile }),
      name: "tackle mesh",
    }),
  );
  try {
    return await work(connection);
  } catch (error) {
    // Memberships and the catalogue are KV buckets: a broker without JetStream has none to read or write.
    if (isNoJetStream(error)) throw noJetStream(config, error);
    // A record the mesh refuses (a prefix that nests with another party's, a seat another module
    // holds): the operator's to change, said in its one line, as any configuration mistake is.
    if (MeshConfigError.isInstance(error)) {
      throw new CliError("invalid_configuration", error.message, { cause: error, exitCode: 2 });
    }
    throw error;
  } finally {
    await connection.drain();
  }
}
