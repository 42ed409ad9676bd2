/**
 * Test-only: an operator, an account with JetStream, and user credentials files, minted with nkeys,
 * so a suite can run nats-server in operator mode and connect on a real JWT + nkey credential.
 */
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createAccount, createOperator, createUser, type KeyPair } from "@nats-io/nkeys";

const encodePart = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

function signJwt(issuer: KeyPair, claims: Record<string, unknown>): string {
  const header = encodePart({ typ: "JWT", alg: "ed25519-nkey" });
  const body = encodePart({
    jti: randomUUID().replaceAll("-", "").toUpperCase(),
    iat: Math.floor(Date.now() / 1000),
    iss: issuer.getPublicKey(),
    ...claims,
  });
  const signature = Buffer.from(issuer.sign(new TextEncoder().encode(`${header}.${body}`))).toString(
    "base64url",
  );
  return `${header}.${body}.${signature}`;
}

export interface OperatorMode {
  /** The nats-server configuration file that trusts the operator and preloads the account. */
  readonly configFile: string;
  /** Writes a credentials file for a user of the account, named `name`, optionally denied some publishes. */
  userCredentials(name: string, options?: { denyPublish?: readonly string[] }): string;
}

export function operatorMode(directory: string): OperatorMode {
  const operator = createOperator();
  const account = createAccount();
  const operatorJwt = signJwt(operator, {
    name: "tackle-test-operator",
    sub: operator.getPublicKey(),
    nats: { type: "operator", version: 2 },
  });
  const unlimited = -1;
  const accountJwt = signJwt(operator, {
    name: "tackle-test-account",
    sub: account.getPublicKey(),
    nats: {
      type: "account",
      version: 2,
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
      },
    },
  });
  // JetStream needs a system account in operator mode.
  const system = createAccount();
  const systemJwt = signJwt(operator, {
    name: "SYS",
    sub: system.getPublicKey(),
    nats: {
      type: "account",
      version: 2,
      limits: { subs: unlimited, data: unlimited, payload: unlimited, conn: unlimited },
    },
  });
  const configFile = join(directory, "operator.conf");
  writeFileSync(
    configFile,
    [
      `operator: ${operatorJwt}`,
      `system_account: ${system.getPublicKey()}`,
      "resolver: MEMORY",
      "resolver_preload: {",
      `  ${account.getPublicKey()}: ${accountJwt}`,
      `  ${system.getPublicKey()}: ${systemJwt}`,
      "}",
      "",
    ].join("\n"),
  );
  return {
    configFile,
    userCredentials(name: string, options: { denyPublish?: readonly string[] } = {}) {
      const user = createUser();
      const userJwt = signJwt(account, {
        name,
        sub: user.getPublicKey(),
        nats: {
          type: "user",
          version: 2,
          pub: options.denyPublish === undefined ? {} : { deny: options.denyPublish },
          sub: {},
          subs: unlimited,
          data: unlimited,
          payload: unlimited,
        },
      });
      const path = join(directory, `${name}.creds`);
      const seed = new TextDecoder().decode(user.getSeed());
      writeFileSync(
        path,
        `-----BEGIN NATS USER JWT-----\n${userJwt}\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n${seed}\n------END USER NKEY SEED------\n`,
        { mode: 0o600 },
      );
      return path;
    },
  };
}
