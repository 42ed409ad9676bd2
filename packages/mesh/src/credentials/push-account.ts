/**
 * Pushes the mesh account's JWT to the servers' `full` resolver over the system account
 * (`$SYS.REQ.CLAIMS.UPDATE`): a revocation in it takes effect at once — the servers close the revoked
 * user's connections and refuse it from then on.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { MeshConfigError } from "../errors/mesh-config-error.ts";
import { accountJwt, type MeshAuthority } from "./mesh-authority.ts";

const claimsUpdateSubject = "$SYS.REQ.CLAIMS.UPDATE";

/**
 * Sends the authority's account JWT on a system-account connection and waits for a server's answer;
 * a refusal throws naming the server's reason.
 */
export async function pushAccount(
  systemConnection: NatsConnection,
  authority: MeshAuthority,
  options: { readonly timeoutMs?: number } = {},
): Promise<void> {
  const jwt = await accountJwt(authority);
  const reply = await systemConnection.request(claimsUpdateSubject, new TextEncoder().encode(jwt), {
    timeout: options.timeoutMs ?? 5000,
  });
  let answer: { data?: { code?: number; message?: string }; error?: { code?: number; description?: string } };
  try {
    answer = reply.json();
  } catch (error) {
    throw new MeshConfigError("account", "the resolver answered the account update with something not JSON", {
      cause: error,
    });
  }
  if (answer.error !== undefined) {
    throw new MeshConfigError(
      "account",
      `the resolver refused the account update: ${answer.error.description ?? JSON.stringify(answer.error)}`,
    );
  }
}
