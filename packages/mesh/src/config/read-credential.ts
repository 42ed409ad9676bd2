/** Reads a NATS credentials file (JWT + nkey seed) and the name its user JWT carries. */
import { readFileSync } from "node:fs";
import { MeshConfigError } from "../errors/mesh-config-error.ts";

export interface Credential {
  readonly bytes: Uint8Array;
  /** The user JWT's `name` claim: the module a bare MESH_TOOL_MODULES path belongs to. */
  readonly name: string | undefined;
  /** The inbox prefix a Tackle-issued credential is limited to (its `tackle-inbox:` tag), if any. */
  readonly inboxPrefix: string | undefined;
}

const jwtBlock = /-----BEGIN NATS USER JWT-----\s*\n\s*([A-Za-z0-9_=.-]+)\s*\n/;
const seedBlock = /-----BEGIN USER NKEY SEED-----\s*\n\s*(SU[A-Z2-7]+)\s*\n/;

export function readCredential(path: string, variable = "MESH_BROKER_FILE"): Credential {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new MeshConfigError(
      variable,
      `cannot read the credentials file ${path}: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
  const jwt = jwtBlock.exec(text)?.[1];
  if (jwt === undefined || !seedBlock.test(text)) {
    throw new MeshConfigError(
      variable,
      `${path} is not a NATS credentials file (it needs a NATS USER JWT block and a USER NKEY SEED block)`,
    );
  }
  const claims = jwtClaims(jwt);
  const name = typeof claims.name === "string" && claims.name !== "" ? claims.name : undefined;
  const tags = Array.isArray(claims.nats?.tags) ? claims.nats.tags : [];
  const tagged = tags.find((tag): tag is string => typeof tag === "string" && tag.startsWith(inboxTag));
  const inboxPrefix = tagged?.slice(inboxTag.length);
  return {
    bytes: new TextEncoder().encode(text),
    name,
    inboxPrefix:
      inboxPrefix !== undefined && /^_INBOX_[A-Za-z0-9]+$/.test(inboxPrefix) ? inboxPrefix : undefined,
  };
}

/** The JWT tag naming a credential's inbox prefix (`issueNodeCredential`, `issueClientCredential`). */
const inboxTag = "tackle-inbox:";

function jwtClaims(jwt: string): { name?: unknown; nats?: { tags?: unknown } } {
  const payload = jwt.split(".")[1];
  if (payload === undefined) return {};
  try {
    return JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) ?? {};
  } catch {
    return {};
  }
}
