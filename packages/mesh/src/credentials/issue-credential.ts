/**
 * Credentials the authority issues (ADR 0209): a user nkey and a user JWT signed by the mesh's account
 * with the role's permissions, as a NATS credentials file. Each credential has an inbox prefix of its
 * own (a JWT tag `connectMesh` reads), so its subscription permission names only its own replies.
 */
import { createUser, encodeUser, fmtCreds, type User } from "@nats-io/jwt";
import { MeshConfigError } from "../errors/mesh-config-error.ts";
import { refuseNestedReach } from "../membership/prefix-overlap.ts";
import { keyPair, type MeshAuthority, systemPublicKey } from "./mesh-authority.ts";
import {
  clientPermissions,
  inboxPrefixFor,
  type ModuleReach,
  nodePermissions,
  type SubjectPermissions,
} from "./permissions.ts";

/** The JWT tag that carries a credential's inbox prefix. */
export const INBOX_TAG = "tackle-inbox:";

export type CredentialRole = "node" | "client" | "issuer" | "system";

export interface IssuedCredential {
  readonly role: CredentialRole;
  /** The JWT's name: the node's own module for a node credential, the given name otherwise. */
  readonly name: string;
  /** The user's public key: what `revokeCredential` takes. */
  readonly publicKey: string;
  /** The credentials file's text (user JWT and nkey seed): write it 0600. */
  readonly creds: string;
  /** What it may publish and subscribe to; absent for the issuer and the system user (everything). */
  readonly permissions?: SubjectPermissions;
  readonly issuedAt: string;
}

/**
 * A node's credential: its modules' subjects and nothing of any other module's. Its JWT names the
 * first module, which a bare `MESH_TOOL_MODULES` path belongs to.
 */
export function issueNodeCredential(
  authority: MeshAuthority,
  options: { readonly node: string; readonly modules: readonly ModuleReach[] },
): Promise<IssuedCredential> {
  const [first] = options.modules;
  if (first === undefined)
    throw new MeshConfigError("credential", `node ${options.node}: a node credential needs a module`);
  // One credential's `<prefix>.>` for each module would reach the other's subjects (ADR 0219).
  refuseNestedReach("credential", options.modules);
  return issue(authority, "node", first.module, (inbox) => nodePermissions(options.modules, inbox), [
    `tackle-node:${options.node}`,
  ]);
}

/** A client's credential: calls to `modules` (their tools and seats) and nothing else. */
export function issueClientCredential(
  authority: MeshAuthority,
  options: { readonly name: string; readonly modules: readonly ModuleReach[] },
): Promise<IssuedCredential> {
  refuseNestedReach("credential", options.modules);
  return issue(authority, "client", options.name, (inbox) => clientPermissions(options.modules, inbox));
}

/** The issuer's own credential: the only one that writes memberships (no permission limits). */
export function issueIssuerCredential(
  authority: MeshAuthority,
  name = "tackle-issuer",
): Promise<IssuedCredential> {
  return issue(authority, "issuer", name, undefined);
}

/** A user of the system account: pushes account updates (revocations) to the servers' resolver. */
export async function issueSystemCredential(authority: MeshAuthority): Promise<IssuedCredential> {
  const user = createUser();
  const jwt = await encodeUser("tackle-system", user, keyPair(authority.systemSeed));
  return {
    role: "system",
    name: "tackle-system",
    publicKey: user.getPublicKey(),
    creds: new TextDecoder().decode(fmtCreds(jwt, user)),
    issuedAt: new Date().toISOString(),
  };
}

async function issue(
  authority: MeshAuthority,
  role: CredentialRole,
  name: string,
  permissionsFor: ((inboxPrefix: string) => SubjectPermissions) | undefined,
  tags: readonly string[] = [],
): Promise<IssuedCredential> {
  const user = createUser();
  const publicKey = user.getPublicKey();
  const inbox = inboxPrefixFor(publicKey);
  const permissions = permissionsFor?.(inbox);
  const claims: Partial<User> = {
    tags: [`tackle-role:${role}`, `${INBOX_TAG}${inbox}`, ...tags],
    ...(permissions === undefined
      ? {}
      : {
          pub: { allow: [...permissions.pub.allow], deny: [...permissions.pub.deny] },
          sub: { allow: [...permissions.sub.allow], deny: [...permissions.sub.deny] },
          ...(permissions.resp === undefined ? {} : { resp: { ...permissions.resp } }),
        }),
  };
  const jwt = await encodeUser(name, user, keyPair(authority.accountSeed), claims);
  return {
    role,
    name,
    publicKey,
    creds: new TextDecoder().decode(fmtCreds(jwt, user)),
    ...(permissions === undefined ? {} : { permissions }),
    issuedAt: new Date().toISOString(),
  };
}

/** Revokes every JWT of `publicKey` issued up to now; the account's JWT must then reach the servers (`pushAccount`). */
export function revokeCredential(authority: MeshAuthority, publicKey: string): MeshAuthority {
  if (!/^U[A-Z2-7]{55}$/.test(publicKey))
    throw new MeshConfigError("credential", `${JSON.stringify(publicKey)} is not a NATS user public key`);
  if (publicKey === systemPublicKey(authority))
    throw new MeshConfigError("credential", "the system account is not a user");
  // A revocation covers JWTs issued at or before this second: one issued in the same second is covered too.
  return {
    ...authority,
    revocations: { ...authority.revocations, [publicKey]: Math.floor(Date.now() / 1000) + 1 },
  };
}
