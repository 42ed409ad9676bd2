/** Reading a request's JSON body, and the `invalid_request` error every route answers bad input with. */
import { DurableError } from "../errors/durable-error.ts";

export function invalid(message: string): DurableError {
  return new DurableError("invalid_request", message);
}

export async function readJson(request: Request): Promise<Record<string, unknown>> {
  // Only JSON: a form or text/plain POST is what a cross-site page can send without a preflight.
  const type = request.headers.get("content-type") ?? "";
  if (!/^application\/json\b/i.test(type)) {
    throw new DurableError("unsupported_media_type", "The body must be sent as application/json");
  }
  let body: unknown;
  try {
    body = await request.json();
  } catch {
    throw invalid("The body is not JSON");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalid("The body is a JSON object");
  return body as Record<string, unknown>;
}
