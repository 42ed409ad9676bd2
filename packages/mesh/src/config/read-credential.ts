/** Reads a NATS credentials file (JWT + nkey seed) and the name its user JWT carries. */
import { readFileSync } from "node:fs";
import { MeshConfigError } from "../errors/mesh-config-error.ts";

export interface Credential {
  readonly bytes: Uint8Array;
  /** The user JWT's `name` claim: the module a bare MESH_TOOL_MODULES path belongs to. */
  readonly name: string | undefined;
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
  return { bytes: new TextEncoder().encode(text), name: jwtName(jwt) };
}

function jwtName(jwt: string): string | undefined {
  const payload = jwt.split(".")[1];
  if (payload === undefined) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { name?: unknown };
    return typeof claims.name === "string" && claims.name !== "" ? claims.name : undefined;
  } catch {
    return undefined;
  }
}
