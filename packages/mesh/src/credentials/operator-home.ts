/**
 * The issuer's folder (ADR 0209): the authority's seeds, the nats-server configuration that trusts it,
 * the issuer's and the system user's credentials, and a register of every credential issued, so a
 * revoke can name what it cuts off. Folder 0700, files 0600: whoever reads it can issue credentials.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MeshConfigError } from "../errors/mesh-config-error.ts";
import {
  type CredentialRole,
  type IssuedCredential,
  issueIssuerCredential,
  issueSystemCredential,
} from "./issue-credential.ts";
import { createMeshAuthority, type MeshAuthority, serverConfig } from "./mesh-authority.ts";

/** One issued credential as the register keeps it (never its seed). */
export interface IssuedRecord {
  readonly publicKey: string;
  readonly role: CredentialRole;
  readonly name: string;
  /** The node a node credential was issued to. */
  readonly node?: string;
  /** The modules it reaches (served by a node, or called by a client). */
  readonly modules: readonly string[];
  readonly issuedAt: string;
  readonly revokedAt?: string;
}

export interface OperatorHome {
  readonly directory: string;
  readonly authority: MeshAuthority;
  /** `<home>/server.conf`: `nats-server -js -c` it (include it from a larger configuration). */
  readonly serverConfigFile: string;
  /** The issuer's credential: the one that writes memberships. */
  readonly issuerCredsFile: string;
  /** The system account's user: pushes revocations to the servers. */
  readonly systemCredsFile: string;
  readonly issued: readonly IssuedRecord[];
}

const authorityFile = "authority.json";
const registerFile = "issued.json";

/** Creates the folder with a new authority; refuses one that already holds an authority. */
export async function initOperatorHome(
  directory: string,
  options: { readonly operatorName?: string; readonly accountName?: string } = {},
): Promise<OperatorHome> {
  if (existsSync(join(directory, authorityFile))) {
    throw new MeshConfigError(
      "home",
      `${directory} already holds a mesh authority; use it, or choose another folder`,
    );
  }
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  chmodSync(directory, 0o700);
  const resolver = join(directory, "resolver");
  mkdirSync(resolver, { recursive: true, mode: 0o700 });
  const authority = createMeshAuthority(options);
  writePrivate(join(directory, authorityFile), `${JSON.stringify(authority, null, 2)}\n`);
  writePrivate(
    join(directory, "server.conf"),
    await serverConfig(authority, { resolverDirectory: resolver }),
  );
  writePrivate(join(directory, "issuer.creds"), (await issueIssuerCredential(authority)).creds);
  writePrivate(join(directory, "system.creds"), (await issueSystemCredential(authority)).creds);
  writePrivate(join(directory, registerFile), "[]\n");
  return openOperatorHome(directory);
}

export function openOperatorHome(directory: string): OperatorHome {
  const path = join(directory, authorityFile);
  let authority: MeshAuthority;
  let issued: IssuedRecord[];
  try {
    authority = JSON.parse(readFileSync(path, "utf8")) as MeshAuthority;
    issued = existsSync(join(directory, registerFile))
      ? (JSON.parse(readFileSync(join(directory, registerFile), "utf8")) as IssuedRecord[])
      : [];
  } catch (error) {
    throw new MeshConfigError(
      "home",
      existsSync(path)
        ? `${path} cannot be read: ${(error as Error).message}`
        : `${directory} holds no mesh authority: create one with tackle mesh init`,
      { cause: error },
    );
  }
  if (typeof authority?.accountSeed !== "string" || typeof authority.operatorSeed !== "string")
    throw new MeshConfigError("home", `${path} is not a mesh authority`);
  return {
    directory,
    authority: { ...authority, revocations: authority.revocations ?? {} },
    serverConfigFile: join(directory, "server.conf"),
    issuerCredsFile: join(directory, "issuer.creds"),
    systemCredsFile: join(directory, "system.creds"),
    issued,
  };
}

/** Adds an issued credential to the register. */
export function recordIssued(
  home: OperatorHome,
  credential: IssuedCredential,
  reach: { readonly node?: string; readonly modules: readonly string[] },
): OperatorHome {
  const record: IssuedRecord = {
    publicKey: credential.publicKey,
    role: credential.role,
    name: credential.name,
    ...(reach.node === undefined ? {} : { node: reach.node }),
    modules: [...reach.modules],
    issuedAt: credential.issuedAt,
  };
  const issued = [...home.issued, record];
  writePrivate(join(home.directory, registerFile), `${JSON.stringify(issued, null, 2)}\n`);
  return { ...home, issued };
}

/** Saves the authority's revocations and marks the register's records revoked. */
export function recordRevoked(
  home: OperatorHome,
  authority: MeshAuthority,
  publicKeys: readonly string[],
): OperatorHome {
  const at = new Date().toISOString();
  const revoked = new Set(publicKeys);
  const issued = home.issued.map((record) =>
    revoked.has(record.publicKey) && record.revokedAt === undefined ? { ...record, revokedAt: at } : record,
  );
  writePrivate(join(home.directory, authorityFile), `${JSON.stringify(authority, null, 2)}\n`);
  writePrivate(join(home.directory, registerFile), `${JSON.stringify(issued, null, 2)}\n`);
  return { ...home, authority, issued };
}

/** Written whole (a temporary file renamed over it), readable by its owner only. */
function writePrivate(path: string, text: string): void {
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, text, { mode: 0o600 });
  renameSync(temporary, path);
}
