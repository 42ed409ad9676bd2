/**
 * The mesh's authority in NATS decentralised auth (ADR 0209): an operator, the mesh's account, the
 * system account the server needs, their nkeys and JWTs (signed by `@nats-io/jwt`), and the account's
 * revocations. Plain data with seeds inside: whoever holds it issues and revokes credentials.
 */
import {
  createAccount,
  createOperator,
  encodeAccount,
  encodeOperator,
  fromSeed,
  type KeyPair,
} from "@nats-io/jwt";

export interface MeshAuthority {
  readonly operatorName: string;
  readonly operatorSeed: string;
  readonly accountName: string;
  readonly accountSeed: string;
  readonly systemSeed: string;
  /** User public key to the unix second before which its JWTs are revoked. */
  readonly revocations: Readonly<Record<string, number>>;
}

const unlimited = -1;

const seedText = (pair: KeyPair) => new TextDecoder().decode(pair.getSeed());

/** A new operator and account, with a system account for the server and for pushing account updates. */
export function createMeshAuthority(
  options: { readonly operatorName?: string; readonly accountName?: string } = {},
): MeshAuthority {
  return {
    operatorName: options.operatorName ?? "tackle",
    operatorSeed: seedText(createOperator()),
    accountName: options.accountName ?? "tackle-mesh",
    accountSeed: seedText(createAccount()),
    systemSeed: seedText(createAccount()),
    revocations: {},
  };
}

export function keyPair(seed: string): KeyPair {
  return fromSeed(new TextEncoder().encode(seed));
}

export function accountPublicKey(authority: MeshAuthority): string {
  return keyPair(authority.accountSeed).getPublicKey();
}

export function systemPublicKey(authority: MeshAuthority): string {
  return keyPair(authority.systemSeed).getPublicKey();
}

export function operatorJwt(authority: MeshAuthority): Promise<string> {
  return encodeOperator(authority.operatorName, keyPair(authority.operatorSeed), {
    system_account: systemPublicKey(authority),
  });
}

/** The mesh account's JWT, with JetStream enabled and the authority's revocations. */
export function accountJwt(authority: MeshAuthority): Promise<string> {
  return encodeAccount(
    authority.accountName,
    keyPair(authority.accountSeed),
    {
      limits: {
        subs: unlimited,
        data: unlimited,
        payload: unlimited,
        imports: unlimited,
        exports: unlimited,
        wildcards: true,
        conn: unlimited,
        leaf: unlimited,
        mem_storage: unlimited,
        disk_storage: unlimited,
        streams: unlimited,
        consumer: unlimited,
      } as never,
      ...(Object.keys(authority.revocations).length === 0
        ? {}
        : { revocations: { ...authority.revocations } }),
    },
    { signer: keyPair(authority.operatorSeed) },
  );
}

export function systemAccountJwt(authority: MeshAuthority): Promise<string> {
  return encodeAccount(
    "SYS",
    keyPair(authority.systemSeed),
    { limits: { subs: unlimited, data: unlimited, payload: unlimited, conn: unlimited } as never },
    { signer: keyPair(authority.operatorSeed) },
  );
}

/**
 * A nats-server configuration that trusts the authority: operator mode, the system account, and a
 * `full` resolver in `resolverDirectory` preloaded with both accounts, which takes account updates
 * (revocations) pushed by `pushAccount` while it runs.
 */
export async function serverConfig(
  authority: MeshAuthority,
  options: { readonly resolverDirectory: string },
): Promise<string> {
  const [operator, account, system] = await Promise.all([
    operatorJwt(authority),
    accountJwt(authority),
    systemAccountJwt(authority),
  ]);
  return [
    `operator: ${operator}`,
    `system_account: ${systemPublicKey(authority)}`,
    // A client's CONNECT line carries its user JWT, and a node's JWT lists every subject of each of its
    // modules: two modules already pass nats-server's default 4 KiB line. 64 KiB holds about forty.
    "max_control_line: 65536",
    "resolver: {",
    "  type: full",
    `  dir: ${JSON.stringify(options.resolverDirectory)}`,
    "  allow_delete: false",
    '  interval: "2m"',
    "}",
    "resolver_preload: {",
    `  ${accountPublicKey(authority)}: ${account}`,
    `  ${systemPublicKey(authority)}: ${system}`,
    "}",
    "",
  ].join("\n");
}
