/** The script API's bindings as the host implements them: their types, held equal to the contract's. */
import type { Entity as SessionEntity } from "../schema/types.ts";
import type { Entity, ScriptEntities, ScriptRelations } from "./script-api.ts";

/**
 * A binding's contract as function-typed properties: the contract declares methods, whose parameters
 * TypeScript checks both ways (bivariantly); as function types they are checked strictly, so a binding
 * that needs more than the contract gives, or returns something else, fails the type-check.
 */
export type Implemented<Contract> = {
  [Method in keyof Contract]: Contract[Method] extends (...args: infer Args) => infer Result
    ? (...args: Args) => Result
    : never;
};

type Equal<X, Y> = (<T>() => T extends X ? 1 : 2) extends <T>() => T extends Y ? 1 : 2 ? true : false;
type Signature<F> = F extends (...args: infer Args) => infer Result
  ? { arity: Args["length"]; result: Result }
  : never;
/**
 * `satisfies` lets a binding take fewer parameters or return a narrower type than the contract states;
 * this also holds each method's parameter count and return type equal to the contract's, so a contract
 * that promises a parameter the binding ignores, or a reply it never gives, fails the type-check too.
 */
export type SignaturesMatch<Bindings, Contract> = false extends {
  [Method in keyof Contract]: Method extends keyof Bindings
    ? Equal<Signature<Bindings[Method]>, Signature<Contract[Method]>>
    : false;
}[keyof Contract]
  ? false
  : true;

/** The bindings the sandbox answers synchronously; `materialize` answers through `callAsync`. */
export type SyncEntities = Implemented<Omit<ScriptEntities, "materialize">>;
export type SyncRelations = Implemented<ScriptRelations>;

/**
 * The session's entity as the contract states it. The projection reads payloads out of Loro maps, lists
 * and text, which hold only JSON values, and each reply crosses into the script as JSON text; the
 * session types them `unknown` because it also validates raw input, so this is the one place that says so.
 */
export function scriptEntity(entity: SessionEntity): Entity {
  return entity as Entity;
}
