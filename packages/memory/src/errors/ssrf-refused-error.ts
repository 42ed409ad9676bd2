/** `ssrf_refused`: the client refused a URL (scheme, or a private, loopback or link-local address). */
import { ToolError } from "@tackle/core";

const ssrfRefusedBrand = Symbol.for("tackle.ssrf-refused-error");

export class SsrfRefusedError extends ToolError {
  readonly [ssrfRefusedBrand] = true;

  constructor(url: string, reason: string) {
    super("ssrf_refused", `Refused to contact ${url}: ${reason}. Set allowPrivateNetwork to reach it.`, {
      data: { url, reason },
    });
    this.name = "SsrfRefusedError";
  }

  static override isInstance(value: unknown): value is SsrfRefusedError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as Record<symbol, unknown>)[ssrfRefusedBrand] === true
    );
  }
}
