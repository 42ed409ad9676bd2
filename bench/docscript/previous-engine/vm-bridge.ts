/** THE PREVIOUS ENGINE's bridge, kept only for the engines bench (see vm-worker.ts). */
/**
 * The source evaluated inside each run's `vm` context before the script: it removes what the script
 * must not have, and builds the bindings there, so no function or object of the worker's realm (and
 * with it that realm's `Function`) ever reaches the script. Every call leaves as JSON text through one
 * worker function held in a closure, and every answer comes back as JSON text parsed in the context.
 */

/** Globals deleted from the context: raw memory, shared memory, WebAssembly and V8's own console. */
export const removedGlobals = [
  "ArrayBuffer",
  "SharedArrayBuffer",
  "Atomics",
  "WebAssembly",
  "DataView",
  "Int8Array",
  "Uint8Array",
  "Uint8ClampedArray",
  "Int16Array",
  "Uint16Array",
  "Int32Array",
  "Uint32Array",
  "Float16Array",
  "Float32Array",
  "Float64Array",
  "BigInt64Array",
  "BigUint64Array",
  "console",
] as const;

/**
 * Evaluates to `function (bridge, surfaceText, removedText)` returning `{ start, settle, describe, makeError }`.
 * Strict mode throughout, so stack frames never reveal these functions or their receivers.
 */
export const scriptBridgeSource = `(function installBridge(bridge, surfaceText, removedText) {
  "use strict";
  const global = globalThis;
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const apply = Reflect.apply;
  const defineProperty = Object.defineProperty;
  const freeze = Object.freeze;
  const create = Object.create;
  const keys = Object.keys;
  const StringOf = String;
  const ErrorClass = Error;
  const TypeErrorClass = TypeError;
  const RangeErrorClass = RangeError;
  const PromiseClass = Promise;
  const promiseThen = Promise.prototype.then;
  const MapClass = Map;
  const mapGet = Map.prototype.get;
  const mapSet = Map.prototype.set;
  const mapDelete = Map.prototype.delete;
  const arrayJoin = Array.prototype.join;
  const stringSlice = String.prototype.slice;
  const pending = new MapClass();

  for (const name of parse(removedText)) delete global[name];

  function makeError(code, message, data) {
    const error = new ErrorClass(StringOf(message));
    defineProperty(error, "name", { value: "DocScriptError", writable: true, configurable: true });
    defineProperty(error, "code", { value: StringOf(code), writable: true, enumerable: true, configurable: true });
    if (data !== undefined && data !== null) {
      defineProperty(error, "data", { value: data, writable: true, enumerable: true, configurable: true });
    }
    return error;
  }

  function cross(message) {
    const text = stringify(message);
    let answer;
    try {
      answer = bridge(text);
    } catch (_) {
      // Whatever the worker threw (a stack overflow, most likely) stays there; a fresh error of this realm takes its place.
      throw new RangeErrorClass("the call could not reach the sandbox host (is the stack exhausted?)");
    }
    return parse(answer);
  }

  function toJsonArguments(args) {
    try {
      return parse(stringify(args));
    } catch (error) {
      if (isErrorLike(error) && error.name === "RangeError") throw error;
      throw new TypeErrorClass("arguments must be plain JSON data: " + safeText(error));
    }
  }

  function callSync(binding, method, args) {
    const answer = cross({ kind: "call", binding, method, args: toJsonArguments(args) });
    if (answer.ok) return answer.value;
    throw makeError(answer.error.code, answer.error.message, answer.error.data);
  }

  function callAsync(binding, method, args) {
    let answer;
    try {
      answer = cross({ kind: "call-async", binding, method, args: toJsonArguments(args) });
    } catch (error) {
      return new PromiseClass((_, reject) => reject(error));
    }
    if (!answer.ok) {
      return new PromiseClass((_, reject) => reject(makeError(answer.error.code, answer.error.message, answer.error.data)));
    }
    return new PromiseClass((resolve, reject) => {
      apply(mapSet, pending, [answer.callId, { resolve, reject }]);
    });
  }

  // instanceof would consult the script's own Symbol.hasInstance; this only reads plain properties.
  function isErrorLike(value) {
    return typeof value === "object" && value !== null && typeof value.message === "string";
  }

  function safeText(value) {
    try {
      if (typeof value === "string") return value;
      if (isErrorLike(value)) return StringOf(value.message);
      const text = stringify(value);
      return text === undefined ? StringOf(value) : text;
    } catch (_) {
      try {
        return StringOf(value);
      } catch (_) {
        return "[unprintable]";
      }
    }
  }

  const surface = parse(surfaceText);
  for (const binding of keys(surface)) {
    const methods = create(null);
    for (const method of keys(surface[binding])) {
      const isAsync = surface[binding][method] === "async";
      methods[method] = {
        [method](...args) {
          return isAsync ? callAsync(binding, method, args) : callSync(binding, method, args);
        },
      }[method];
    }
    defineProperty(global, binding, { value: freeze(methods), writable: false, enumerable: false, configurable: false });
  }

  const consoleObject = create(null);
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    consoleObject[level] = {
      [level](...args) {
        const parts = [];
        // Indexes, not for-of: the script may have replaced Array.prototype[Symbol.iterator].
        for (let index = 0; index < args.length; index++) parts[index] = safeText(args[index]);
        cross({ kind: "console", level, text: apply(arrayJoin, parts, [" "]) });
      },
    }[level];
  }
  defineProperty(global, "console", { value: freeze(consoleObject), writable: false, enumerable: false, configurable: false });

  function describe(value) {
    const error = { code: "script_error", message: safeText(value) };
    try {
      if (isErrorLike(value)) {
        error.name = StringOf(value.name);
        if (typeof value.code === "string") error.code = value.code;
        if (typeof value.stack === "string") error.stack = apply(stringSlice, value.stack, [0, 4000]);
      }
    } catch (_) {}
    return stringify(error);
  }

  function finish(outcome) {
    cross({ kind: "finish", outcome });
  }

  function start(main) {
    let promise;
    try {
      promise = main();
    } catch (error) {
      finish({ ok: false, error: parse(describe(error)) });
      return;
    }
    try {
      apply(promiseThen, promise, [
        () => finish({ ok: true }),
        (error) => finish({ ok: false, error: parse(describe(error)) }),
      ]);
    } catch (error) {
      finish({ ok: false, error: parse(describe(error)) });
    }
  }

  function settle(text) {
    const answer = parse(text);
    const entry = apply(mapGet, pending, [answer.callId]);
    if (entry === undefined) return;
    apply(mapDelete, pending, [answer.callId]);
    if (answer.ok) entry.resolve(answer.value);
    else entry.reject(makeError(answer.error.code, answer.error.message, answer.error.data));
  }

  return freeze({ start, settle, describe, makeError: (message) => makeError("import_refused", message) });
})`;
