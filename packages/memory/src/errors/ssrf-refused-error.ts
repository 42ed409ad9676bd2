/** `ssrf_refused`: the client refused a URL (scheme, or a private, loopback or link-local address). */
import { ToolError } from "@tackle/core";

export class SsrfRefusedError extends ToolError<
  "ssrf_refused",
  { readonly url: string; readonly reason: string }
> {
  static override readonly brand: symbol = Symbol.for("tackle.ssrf-refused-error");

  constructor(url: string, reason: string) {
    super("ssrf_refused", `Refused to contact ${url}: ${reason}. Set allowPrivateNetwork to reach it.`, {
      data: { url, reason },
    });
    this.name = "SsrfRefusedError";
  }
}
