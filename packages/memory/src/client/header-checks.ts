/**
 * The headers every `MemoryClient` call sends, checked once when the client is made by `node:http`'s
 * own rules (ADR 0549): a value with a line break (or any character a header cannot carry) would fail
 * each call with an untyped `TypeError`. The refusal names the header and the option, never the value:
 * it may be the API key.
 */
import { validateHeaderName, validateHeaderValue } from "node:http";
import { MemoryError } from "../errors/memory-error.ts";

export function checkHeaders(apiKey: string | undefined, headers: Readonly<Record<string, string>>): void {
  if (apiKey) checkHeader("Authorization", `Bearer ${apiKey}`, "apiKey");
  for (const [name, value] of Object.entries(headers)) checkHeader(name, value, "headers");
}

function checkHeader(name: string, value: string, option: "apiKey" | "headers"): void {
  const path = option === "apiKey" ? ["apiKey"] : ["headers", name];
  const refuse = (what: string) =>
    new MemoryError("invalid_input", `The ${JSON.stringify(name)} header (${option}) ${what}`, 400, {
      data: { issues: [{ path, message: what }] },
    });
  try {
    validateHeaderName(name);
  } catch {
    throw refuse("has a name HTTP does not allow: a token of letters, digits and !#$%&'*+-.^_`|~");
  }
  try {
    validateHeaderValue(name, value);
  } catch {
    throw refuse(
      "cannot carry its value: a header holds one line of visible characters, spaces and tabs, and no character past U+00FF",
    );
  }
}
