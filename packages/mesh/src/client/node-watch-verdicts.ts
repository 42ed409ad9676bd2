/**
 * The node watch's verdicts (ADR 0207): which calls in flight are lost (`node_lost`), lost their reply
 * (`reply_lost`) or never reached a node (`not_delivered`), and which silent nodes to ask about.
 */
import { ToolError } from "@tackle/core";
import type { Instance, ModuleWatch, Watched, WatchedCalls } from "./node-watch-types.ts";

export interface Verdicts {
  readonly probeMs: number;
  readonly lostAfterMs: number;
  readonly calls: WatchedCalls;
  /** Asks whether a silent node process is still connected (its answer judges the module again). */
  check(instance: Instance): void;
  /** Asks whether any node serves the module at all ("no responders" judges the module again). */
  checkEmpty(): void;
}

/** Judges every call of one module as of `now`; a call with no verdict yet is left waiting. */
export function judgeModule(watch: ModuleWatch, now: number, verdicts: Verdicts): void {
  const { probeMs, lostAfterMs, calls } = verdicts;
  for (const [callId, call] of watch.calls) {
    if (call.finished !== undefined) {
      // Its reply goes out before the node's answer, on the node's one connection: a call still
      // waiting when the answer came lost its reply. Half a tick more lets a reordered reply land.
      if (now - call.finished.at < probeMs / 2) continue;
      watch.calls.delete(callId);
      const { node, outcome } = call.finished;
      calls.lost(
        call.token,
        new ToolError(
          "reply_lost",
          `Node ${node} ran "${call.name}" to its end (${outcome === "ok" ? "it succeeded" : `it failed ${outcome}`}), but the reply was lost on the way back (a broker outage); it ran, so check before calling again`,
          { retryable: false, data: { tool: call.name, node, outcome } },
        ),
      );
      continue;
    }
    if (call.holder !== undefined) {
      if (now - call.seenAt <= lostAfterMs) continue;
      const holder = call.holder;
      // A holder that still answers, without the call, has let it go (restarted in place, or it
      // replied); one that is silent may only be busy: it is failed once the bus says it is gone.
      if (now - holder.lastSeen > lostAfterMs && !holder.gone) {
        verdicts.check(holder);
        continue;
      }
      // One that answers is asked once whether it finished the call (the reply was lost).
      if (!holder.gone && !call.disownedBy.has(holder)) {
        call.check = true;
        continue;
      }
      watch.calls.delete(callId);
      calls.lost(
        call.token,
        new ToolError(
          "node_lost",
          `Node ${holder.node}, which was running "${call.name}", is gone (it has not claimed the call for ${lostAfterMs} ms${holder.gone ? " and its connection to the bus has closed" : ""}); the tool may have run, so check before calling again`,
          { retryable: false, data: { tool: call.name, node: holder.node, started: true } },
        ),
      );
      continue;
    }
    if (now - call.listedAt <= lostAfterMs) continue;
    // No node that answers holds it: it went to a node that was alive when it was sent and is silent
    // now. Only once the bus says every such node's connection is gone: a busy one may hold it unread.
    const gone = new Set<string>();
    const live: Instance[] = [];
    let busy = false;
    for (const instance of watch.instances.values()) {
      if (instance.lastSeen < call.listedAt - 3 * probeMs) continue;
      if (now - instance.lastSeen <= lostAfterMs) live.push(instance);
      else if (instance.gone) gone.add(instance.node);
      else {
        busy = true;
        verdicts.check(instance);
      }
    }
    if (busy) continue;
    if (gone.size === 0 && live.length === 0 && !call.suspended) {
      // No node that answers was there when it was sent: the one it went to never answered (it died,
      // or was closed, before a question reached it). That one is gone only if nothing serves the
      // module any more; a node busy from the start still holds its subscriptions, so it waits. (A
      // call caught by this client's own outage is left to the nodes' disowning once they are back.)
      if (watch.emptyAt === undefined || watch.emptyAt < call.sentAt) {
        verdicts.checkEmpty();
        continue;
      }
      watch.calls.delete(callId);
      calls.lost(
        call.token,
        new ToolError(
          "node_lost",
          `"${call.name}" was sent to a node that went away before it answered, and no node serves the module now; the tool may have run, so check before calling again`,
          { retryable: false, data: { tool: call.name, started: "unknown" } },
        ),
      );
      continue;
    }
    if (gone.size === 0) {
      // Caught in flight by a dropped connection (this client's, or a node's that reconnected since
      // it was sent), and no node that answers holds it: asked with `disown`, each says whether it
      // finished it or never saw it (and will now refuse it).
      const reconnected = live.filter((instance) => instance.reconnectedAt >= call.sentAt);
      if (live.length > 0 && (call.suspended || reconnected.length > 0))
        notDelivered(watch, callId, call, live, reconnected, calls);
      continue;
    }
    const nodes = [...gone].sort();
    watch.calls.delete(callId);
    calls.lost(
      call.token,
      new ToolError(
        "node_lost",
        `"${call.name}" was sent as node ${nodes.join(" or node ")} went away, and no node that answers holds it; the tool may have run, so check before calling again`,
        {
          retryable: false,
          data: {
            tool: call.name,
            node: nodes[0],
            ...(nodes.length > 1 ? { nodes } : {}),
            started: "unknown",
          },
        },
      ),
    );
  }
}

/**
 * A call caught by the outage that every node that could have received it disowned: it never ran,
 * and never will. A node whose memory does not reach back to its send cannot tell: it waits.
 */
function notDelivered(
  watch: ModuleWatch,
  callId: string,
  call: Watched,
  live: readonly Instance[],
  reconnected: readonly Instance[],
  calls: WatchedCalls,
): void {
  if (!live.every((instance) => call.disownedBy.has(instance))) {
    call.check = true;
    return;
  }
  if (!live.every((instance) => call.disownedBy.get(instance) === true)) return;
  const nodes = [...new Set(live.map((instance) => instance.node))].sort();
  watch.calls.delete(callId);
  calls.lost(
    call.token,
    new ToolError(
      "not_delivered",
      `"${call.name}" never reached a node: ${call.suspended ? "this client's" : `node ${[...new Set(reconnected.map((instance) => instance.node))].sort().join(" and node ")}'s`} connection to NATS dropped while it was in flight, and every node serving it (${nodes.join(", ")}) says it did not receive it and will not run it; it did not run, so it is safe to call again`,
      { retryable: true, data: { tool: call.name, nodes } },
    ),
  );
}
