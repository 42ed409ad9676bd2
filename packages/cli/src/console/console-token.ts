/** The console's bearer token: a 0600 file created on first start and read by `--console` clients. */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { CliError } from "../program/cli-error.ts";

export interface ConsoleToken {
  readonly path: string;
  readonly token: string;
  /** True when this call wrote the file. */
  readonly created: boolean;
}

/** Reads the token, creating it (0600, in a 0700 directory) if the file does not exist. */
export function ensureConsoleToken(path: string): ConsoleToken {
  try {
    return { path, token: readConsoleToken(path), created: false };
  } catch (error) {
    if ((error as { cause?: NodeJS.ErrnoException }).cause?.code !== "ENOENT") throw error;
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const token = randomBytes(32).toString("base64url");
  try {
    // `wx` fails if another process created the file between our read and this write: read theirs.
    writeFileSync(path, `${token}\n`, { mode: 0o600, flag: "wx" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST")
      return { path, token: readConsoleToken(path), created: false };
    throw new CliError(
      "token_file",
      `Cannot create the console token file ${path}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  chmodSync(path, 0o600);
  return { path, token, created: true };
}

/** Reads a token file, refusing one that other users can read. */
export function readConsoleToken(path: string): string {
  let text: string;
  try {
    const mode = statSync(path).mode & 0o777;
    if ((mode & 0o077) !== 0) {
      throw new CliError(
        "token_file",
        `The console token file ${path} is readable by other users (mode ${mode.toString(8)}); run: chmod 600 ${path}`,
      );
    }
    text = readFileSync(path, "utf8").trim();
  } catch (error) {
    if (CliError.isInstance(error)) throw error;
    throw new CliError(
      "token_file",
      `Cannot read the console token file ${path}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  if (text === "")
    throw new CliError(
      "token_file",
      `The console token file ${path} is empty; delete it and restart the console`,
    );
  // A bearer token is one word of these characters (RFC 6750); any other text could never be sent back
  // in an Authorization header, and every client would be told its token is wrong.
  if (!/^[A-Za-z0-9\-._~+/]+=*$/.test(text))
    throw new CliError(
      "token_file",
      `The console token file ${path} does not hold a token (one word of letters, digits and -._~+/); delete it and restart the console`,
    );
  return text;
}

/** Compares a presented `Authorization` header with the token in constant time. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  if (header === undefined) return false;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (match === null) return false;
  const presented = Buffer.from(match[1]!);
  const expected = Buffer.from(token);
  return presented.length === expected.length && timingSafeEqual(presented, expected);
}
