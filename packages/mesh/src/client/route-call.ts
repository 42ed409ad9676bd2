/** Where a `module.tool` call or a seat's verb goes, and what its caller is told when nothing is there. */
import { ToolAbortedError, type ToolCallResult, ToolError, UnknownToolError } from "@tackle/core";
import { moduleNamePattern, toolNameProblem, toolSubjectPattern } from "../config/names.ts";
import { listMemberships } from "../membership/membership-store.ts";
import { seatNamePattern } from "../membership/records.ts";
import type { ModuleInfo } from "../runtime/module-info.ts";
import type { ClientLink } from "./client-link.ts";
import { ReadDeadline, withDeadline } from "./deadline.ts";
import type { MeshCallOptions } from "./mesh-client-api.ts";
import { catalogueTimeoutMs, type ModuleDirectory } from "./module-directory.ts";
import type { SendCall } from "./send-call.ts";
import { untilAborted } from "./until-aborted.ts";

/** Calls `module.tool` where the catalogue puts the module; a miss is told apart as unknown or unreachable. */
export async function callTool(
  directory: ModuleDirectory,
  send: SendCall,
  name: string,
  args: unknown,
  callOptions: MeshCallOptions,
): Promise<ToolCallResult> {
  const dot = name.indexOf(".");
  const module = name.slice(0, Math.max(dot, 0));
  const tool = name.slice(dot + 1);
  if (dot <= 0 || tool === "" || !moduleNamePattern.test(module)) {
    return {
      ok: false,
      error: new ToolError("invalid_request", `"${name}" is not a mesh tool name: write module.tool`, {
        data: { name },
      }),
    };
  }
  // Never sent: a wildcard, a space or `tools.held` would address another subject than a tool's.
  const problem = toolNameProblem(tool);
  if (problem !== undefined) return { ok: false, error: notAName(name, problem) };
  const signal = callOptions.signal;
  // Aborted before the call: nothing is read or sent.
  if (signal?.aborted) return { ok: false, error: new ToolAbortedError(name, signal.reason) };
  let listing: ModuleInfo;
  try {
    const prefix = directory.cachedPrefix(module) ?? (await directory.prefixOf(module, false, signal));
    const result = await send(`${prefix}.${tool}`, args, callOptions, name, prefix);
    if (result.ok || result.error.code !== "no_responders") return result;
    // Nothing answered that subject: either the tool does not exist or the module is not served.
    await directory.prefixOf(module, true, signal);
    listing = await directory.tools(module, signal);
  } catch (error) {
    if (ToolAbortedError.isInstance(error))
      return { ok: false, error: new ToolAbortedError(name, signal?.reason) };
    throw error;
  }
  if (listing.status === "unreachable") {
    return {
      ok: false,
      error: new ToolError("unreachable", `Module "${module}" is unreachable: no runtime answers for it`, {
        retryable: true,
        data: { module },
      }),
    };
  }
  if (listing.tools.some((entry) => entry.name === tool)) {
    const moved = await directory.prefixOf(module, false, signal).catch((error: unknown) => {
      if (ToolAbortedError.isInstance(error)) return undefined;
      throw error;
    });
    if (moved === undefined) return { ok: false, error: new ToolAbortedError(name, signal?.reason) };
    return send(`${moved}.${tool}`, args, callOptions, name, moved);
  }
  return {
    ok: false,
    error: new UnknownToolError(
      name,
      listing.tools.map((entry) => `${module}.${entry.name}`),
    ),
  };
}

/** Calls a seat's verb where the membership put it. */
export async function callSeat(
  link: ClientLink,
  send: SendCall,
  seat: string,
  verb: string,
  args: unknown,
  callOptions: MeshCallOptions,
): Promise<ToolCallResult> {
  const name = `${seat}.${verb}`;
  if (typeof seat !== "string" || !seatNamePattern.test(seat))
    return { ok: false, error: notAName(name, `a seat name matches ${seatNamePattern.source}`) };
  if (typeof verb !== "string" || !toolSubjectPattern.test(verb))
    return {
      ok: false,
      error: notAName(name, `a verb is dot-separated, non-empty parts of A-Z, a-z, 0-9, _ and -`),
    };
  const signal = callOptions.signal;
  // Aborted before the call: nothing is read or sent.
  if (signal?.aborted) return { ok: false, error: new ToolAbortedError(name, signal.reason) };
  let memberships: Awaited<ReturnType<typeof listMemberships>>;
  try {
    // A membership read caught by a dropped connection must not hold the call. A record that does
    // not parse is its runtime's to report (it logs the refusal); here it holds no seat.
    const read = untilAborted(listMemberships(link.connection, {}, { onInvalid: () => {} }), signal, name);
    memberships = await withDeadline(read, catalogueTimeoutMs);
  } catch (error) {
    if (ToolAbortedError.isInstance(error)) return { ok: false, error };
    if (!(error instanceof ReadDeadline)) throw error;
    return {
      ok: false,
      error: new ToolError(
        "unavailable",
        `The mesh's memberships could not be read within ${catalogueTimeoutMs} ms; "${name}" was not sent`,
        { retryable: true, data: { seat, verb } },
      ),
    };
  }
  // Its own seats only: `toString` or `__proto__` is no seat of a record, whatever a plain object inherits.
  const holders = memberships.filter((record) => Object.hasOwn(record.seats, seat));
  const modules = [...new Set(holders.map((record) => record.module))].sort();
  if (modules.length > 1) {
    // Records issued before ADR 0224 may give one seat to two modules: the call goes to neither.
    return {
      ok: false,
      error: new ToolError(
        "ambiguous_seat",
        `Seat "${seat}" is held by modules ${modules.join(", ")}; "${name}" was not sent: revoke the seat from all but one (tackle mesh revoke)`,
        { data: { seat, verb, modules } },
      ),
    };
  }
  const holder = holders[0];
  if (holder === undefined) {
    return {
      ok: false,
      error: new ToolError("unknown_seat", `No module holds seat "${seat}"`, { data: { seat } }),
    };
  }
  const result = await send(`${holder.seats[seat]}.${verb}`, args, callOptions, name, holder.prefix);
  if (!result.ok && result.error.code === "no_responders") {
    return {
      ok: false,
      error: new ToolError(
        "unknown_tool",
        `Seat "${seat}" (held by ${holder.module}) has no verb "${verb}" answering`,
        {
          data: { seat, verb, module: holder.module },
        },
      ),
    };
  }
  return result;
}

/** A call whose name cannot be on the bus: refused before anything is read or sent, never retryable. */
function notAName(name: string, why: string): ToolError {
  return new ToolError("invalid_request", `"${name}" is not a mesh tool name: ${why}; nothing was sent`, {
    retryable: false,
    data: { name },
  });
}
