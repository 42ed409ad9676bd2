/**
 * The source evaluated inside each run's QuickJS context before the script. It removes what the script
 * must not have, then builds the bindings from host functions it holds in closures: one host function per
 * binding method (so the script never names what the host runs), each taking the call's arguments as
 * JSON text made here and answering JSON text parsed here. Nothing of the host's JavaScript realm exists
 * in the engine: every value the script touches is the engine's own.
 */

/** Globals deleted from each context: code that runs off the script's stack, and the engine's code compilers. */
export const removedGlobals = ["FinalizationRegistry", "WeakRef", "queueMicrotask"] as const;

/** The constructors that compile strings; each is replaced by one that throws an `EvalError`. */
export const compilingConstructors = [
  "Function",
  "GeneratorFunction",
  "AsyncFunction",
  "AsyncGeneratorFunction",
] as const;

/**
 * Evaluates to `function (host, surfaceText, removedText)` returning `{ start, settle, audit }`. `host`
 * holds the host functions: `call:<binding>.<method>` (sync or async per the surface), `log:<level>`,
 * and `finish`; the object itself never reaches the script.
 */
export const scriptBridgeSource = `(function installBridge(host, surfaceText, removedText) {
  "use strict";
  const global = globalThis;
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const apply = Reflect.apply;
  const defineProperty = Object.defineProperty;
  const getPrototypeOf = Object.getPrototypeOf;
  const freeze = Object.freeze;
  const create = Object.create;
  const keys = Object.keys;
  const StringOf = String;
  const ErrorClass = Error;
  const EvalErrorClass = EvalError;
  const TypeErrorClass = TypeError;
  const PromiseClass = Promise;
  const promiseThen = Promise.prototype.then;
  const MapClass = Map;
  const mapGet = Map.prototype.get;
  const mapSet = Map.prototype.set;
  const mapDelete = Map.prototype.delete;
  const arrayJoin = Array.prototype.join;
  const stringSlice = String.prototype.slice;
  const pending = new MapClass();
  /** Binding promises something awaited or chained (it read their constructor), by call id. */
  const observed = new MapClass();
  /** Rejected binding promises nothing has observed yet, by call id, with their messages. */
  const unobserved = new MapClass();

  for (const name of parse(removedText)) delete global[name];

  // Compiling strings stays inside the engine, but a script has no need of it: each compiler throws.
  const refuseCompile = function Function() {
    throw new EvalErrorClass("code generation from strings is not available in an edit script");
  };
  const compilers = [
    function () {}, function* () {}, async function () {}, async function* () {},
  ];
  for (let index = 0; index < compilers.length; index++) {
    const prototype = getPrototypeOf(compilers[index]);
    defineProperty(prototype, "constructor", { value: refuseCompile, writable: false, enumerable: false, configurable: false });
  }
  defineProperty(refuseCompile, "prototype", { value: getPrototypeOf(compilers[0]), writable: false, enumerable: false, configurable: false });
  defineProperty(global, "Function", { value: refuseCompile, writable: true, enumerable: false, configurable: true });
  const refuseEval = {
    eval(_) {
      throw new EvalErrorClass("code generation from strings is not available in an edit script");
    },
  }.eval;
  defineProperty(global, "eval", { value: refuseEval, writable: true, enumerable: false, configurable: true });

  // Stack frames are the engine's own, but a prepareStackTrace hook would hand the script the bridge's
  // functions and receivers: setting it is accepted and changes nothing.
  defineProperty(ErrorClass, "prepareStackTrace", {
    get: function prepareStackTrace() { return undefined; },
    set: function prepareStackTrace(_) {},
    enumerable: false,
    configurable: false,
  });

  function makeError(code, message, data) {
    const error = new ErrorClass(StringOf(message));
    defineProperty(error, "name", { value: "DocScriptError", writable: true, configurable: true });
    defineProperty(error, "code", { value: StringOf(code), writable: true, enumerable: true, configurable: true });
    if (data !== undefined && data !== null) {
      defineProperty(error, "data", { value: data, writable: true, enumerable: true, configurable: true });
    }
    return error;
  }

  function argumentsText(args) {
    let text;
    try {
      text = stringify(args);
    } catch (error) {
      throw new TypeErrorClass("arguments must be plain JSON data: " + safeText(error));
    }
    if (typeof text !== "string") throw new TypeErrorClass("arguments must be plain JSON data");
    return text;
  }

  function callSync(hostFunction, args) {
    const answer = parse(hostFunction(argumentsText(args)));
    if (answer.ok) return answer.value;
    throw makeError(answer.error.code, answer.error.message, answer.error.data);
  }

  function watch(promise, callId) {
    // Awaiting, then(), catch(), finally() and Promise.all all read a promise's constructor first.
    defineProperty(promise, "constructor", {
      configurable: true,
      enumerable: false,
      get() {
        apply(mapSet, observed, [callId, true]);
        apply(mapDelete, unobserved, [callId]);
        return PromiseClass;
      },
      set(value) {
        apply(mapSet, observed, [callId, true]);
        apply(mapDelete, unobserved, [callId]);
        defineProperty(promise, "constructor", { value, writable: true, enumerable: false, configurable: true });
      },
    });
    return promise;
  }

  function callAsync(hostFunction, args) {
    let answer;
    try {
      answer = parse(hostFunction(argumentsText(args)));
    } catch (error) {
      return new PromiseClass((_, reject) => reject(error));
    }
    if (!answer.ok) {
      return new PromiseClass((_, reject) => reject(makeError(answer.error.code, answer.error.message, answer.error.data)));
    }
    const callId = answer.callId;
    return watch(new PromiseClass((resolve, reject) => {
      apply(mapSet, pending, [callId, { resolve, reject }]);
    }), callId);
  }

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
      const hostFunction = host["call:" + binding + "." + method];
      const isAsync = surface[binding][method] === "async";
      methods[method] = {
        [method](...args) {
          return isAsync ? callAsync(hostFunction, args) : callSync(hostFunction, args);
        },
      }[method];
    }
    defineProperty(global, binding, { value: freeze(methods), writable: false, enumerable: false, configurable: false });
  }

  const consoleObject = create(null);
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    const hostFunction = host["log:" + level];
    consoleObject[level] = {
      [level](...args) {
        const parts = [];
        for (let index = 0; index < args.length; index++) parts[index] = safeText(args[index]);
        // Cut here, in the script's own time: the host copies at most a bounded line.
        hostFunction(apply(stringSlice, apply(arrayJoin, parts, [" "]), [0, 2000]));
      },
    }[level];
  }
  defineProperty(global, "console", { value: freeze(consoleObject), writable: false, enumerable: false, configurable: false });

  const finishHost = host.finish;

  function plainData(value) {
    try {
      const text = stringify(value);
      if (typeof text === "string" && text.length > 16384) return { elided: true, chars: text.length };
      return text === undefined ? undefined : parse(text);
    } catch (_) {
      return undefined;
    }
  }

  function describe(value) {
    const error = { code: "script_error", message: apply(stringSlice, StringOf(safeText(value)), [0, 4000]) };
    try {
      if (isErrorLike(value)) {
        error.name = apply(stringSlice, StringOf(value.name), [0, 100]);
        if (typeof value.code === "string") error.code = apply(stringSlice, value.code, [0, 100]);
        if (typeof value.stack === "string") error.stack = apply(stringSlice, value.stack, [0, 4000]);
        if (typeof value.lineNumber === "number") error.lineNumber = value.lineNumber;
        if (value.data !== undefined) {
          const data = plainData(value.data);
          if (data !== undefined) error.data = data;
        }
      }
    } catch (_) {}
    return error;
  }

  function finish(outcome) {
    let text;
    try {
      text = stringify(outcome);
    } catch (_) {
      text = undefined;
    }
    finishHost(typeof text === "string" ? text : '{"ok":false,"error":{"code":"script_error","message":"the script ended with an unreadable value"}}');
  }

  function start(main) {
    let promise;
    try {
      promise = main();
    } catch (error) {
      finish({ ok: false, error: describe(error) });
      return;
    }
    try {
      apply(promiseThen, promise, [
        () => finish({ ok: true }),
        (error) => finish({ ok: false, error: describe(error) }),
      ]);
    } catch (error) {
      finish({ ok: false, error: describe(error) });
    }
  }

  function settle(text) {
    const answer = parse(text);
    const entry = apply(mapGet, pending, [answer.callId]);
    if (entry === undefined) return;
    apply(mapDelete, pending, [answer.callId]);
    if (answer.ok) {
      apply(mapDelete, unobserved, [answer.callId]);
      entry.resolve(answer.value);
    } else {
      const error = makeError(answer.error.code, answer.error.message, answer.error.data);
      if (apply(mapGet, observed, [answer.callId]) !== true) apply(mapSet, unobserved, [answer.callId, error.message]);
      entry.reject(error);
    }
  }

  /** After the script: the first rejected binding promise nothing awaited, or null. */
  function audit(callIdsText) {
    const callIds = parse(callIdsText);
    for (let index = 0; index < callIds.length; index++) {
      const message = apply(mapGet, unobserved, [callIds[index]]);
      if (message !== undefined) return stringify({ message });
    }
    return "null";
  }

  return freeze({ start, settle, audit });
})`;
