/** `tackle serve --durable-url` (or TACKLE_CONSOLE_DURABLE_URL): the durable server the runs page shows. */
import { isLoopbackHost } from "@tackle/core/internal";

/** What is wrong with `text` as a durable server's URL, or undefined when it is an http URL on loopback. */
export function durableUrlProblem(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return `${JSON.stringify(text)} is not a URL: give the durable server's, e.g. http://127.0.0.1:4290`;
  }
  if (url.protocol !== "http:") return `${text}: the durable server's URL is http://…`;
  if (!isLoopbackHost(url.hostname.replace(/^\[|\]$/g, "")))
    return `${text}: the durable server answers on loopback only (127.0.0.1, ::1, localhost)`;
  return undefined;
}
