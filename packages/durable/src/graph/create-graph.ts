/** `createGraph`: the nodes of a run, the edges between them and the routes that choose among them. */
import { DurableError } from "../errors/durable-error.ts";
import type { NodeContext } from "../runner/node-context.ts";

/** Where a run begins: `edge(START, "first")`; without it, the first node added. */
export const START = "__start__";
/** Where a run ends: route here, or leave a node without an outgoing edge. */
export const END = "__end__";

// biome-ignore lint/suspicious/noConfusingVoidType: a node that changes nothing returns nothing
export type StateUpdate<State> = Partial<State> | void;

/** A node: reads the state, may step, interrupt and emit through `ctx`, returns a shallow update. */
export type NodeFunction<State> = (
  state: Readonly<State>,
  ctx: NodeContext,
) => StateUpdate<State> | Promise<StateUpdate<State>>;

/** Chooses the next node (or END) from the state after a node ran. */
export type Router<State> = (state: Readonly<State>) => string;

export interface Graph<State extends object = Record<string, unknown>> {
  readonly name: string;
  /** This code's version of the graph (default 1); a run records the version it started on. */
  readonly version: number;
  /** Earlier versions whose paused or interrupted runs this version can resume (their runs' `ctx.version`). */
  readonly compatibleWith: readonly number[];
  node(name: string, fn: NodeFunction<State>): Graph<State>;
  edge(from: string, to: string): Graph<State>;
  /** Conditional routing: after `from`, go where `router` says. */
  branch(from: string, router: Router<State>): Graph<State>;
  /** The entry node; throws `invalid_graph` when an edge names a missing node. */
  entry(): string;
  nodeFunction(name: string): NodeFunction<State> | undefined;
  /** The node after `from` for this state, or null at the end. */
  next(from: string, state: Readonly<State>): string | null;
}

const namePattern = /^[A-Za-z0-9_.-]{1,64}$/;

export interface GraphOptions {
  /** A whole number ≥ 1; default 1. Raise it when a change would make older runs replay differently. */
  readonly version?: number;
  /**
   * Versions whose runs this code resumes: it keeps their paths (branching on `ctx.version` where it
   * changed them). A run of a version not listed fails `journal_mismatch`, naming where it stands.
   */
  readonly compatibleWith?: readonly number[];
}

export function createGraph<State extends object = Record<string, unknown>>(
  name = "default",
  options: GraphOptions = {},
): Graph<State> {
  const version = options.version ?? 1;
  const compatibleWith = Object.freeze([...(options.compatibleWith ?? [])]);
  for (const value of [version, ...compatibleWith]) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new DurableError(
        "invalid_graph",
        `Graph "${name}": versions are whole numbers ≥ 1 (got ${String(value)})`,
        {
          data: { graph: name },
        },
      );
    }
  }
  const nodes = new Map<string, NodeFunction<State>>();
  const edges = new Map<string, string | Router<State>>();

  function invalid(message: string): DurableError {
    return new DurableError("invalid_graph", `Graph "${name}": ${message}`, { data: { graph: name } });
  }

  function checkTarget(target: string): void {
    if (target !== END && !nodes.has(target)) throw invalid(`an edge leads to the missing node "${target}"`);
  }

  const graph: Graph<State> = {
    name,
    version,
    compatibleWith,
    node(nodeName, fn) {
      if (!namePattern.test(nodeName) || nodeName === START || nodeName === END) {
        throw invalid(`node names match ${namePattern} (got ${JSON.stringify(nodeName)})`);
      }
      if (nodes.has(nodeName)) throw invalid(`the node "${nodeName}" is defined twice`);
      nodes.set(nodeName, fn);
      return graph;
    },
    edge(from, to) {
      if (edges.has(from)) throw invalid(`the node "${from}" already has an outgoing edge`);
      edges.set(from, to);
      return graph;
    },
    branch(from, router) {
      if (edges.has(from)) throw invalid(`the node "${from}" already has an outgoing edge`);
      edges.set(from, router);
      return graph;
    },
    entry() {
      for (const [from, to] of edges) {
        if (from !== START && !nodes.has(from)) throw invalid(`an edge leaves the missing node "${from}"`);
        if (typeof to === "string") checkTarget(to);
      }
      const first = edges.get(START) ?? nodes.keys().next().value;
      if (typeof first !== "string" || !nodes.has(first)) throw invalid("it has no nodes");
      return first;
    },
    nodeFunction: (nodeName) => nodes.get(nodeName),
    next(from, state) {
      const edge = edges.get(from);
      if (edge === undefined) return null;
      const target = typeof edge === "string" ? edge : edge(state);
      if (target === END) return null;
      checkTarget(target);
      return target;
    },
  };
  return graph;
}
