import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { hasBrand } from "./brand.ts";
import { InvalidInputError } from "./invalid-input-error.ts";
import { InvalidOutputError } from "./invalid-output-error.ts";
import { ToolAbortedError } from "./tool-aborted-error.ts";
import { ToolDefinitionError } from "./tool-definition-error.ts";
import { isNotFound, ToolError } from "./tool-error.ts";
import { ToolFailedError } from "./tool-failed-error.ts";
import { ToolTimeoutError } from "./tool-timeout-error.ts";
import { UnknownToolError } from "./unknown-tool-error.ts";

const issues = [{ path: ["id"], message: "expected string" }];
const classes = [
  [InvalidInputError, () => new InvalidInputError("t", issues)],
  [InvalidOutputError, () => new InvalidOutputError("t", issues)],
  [ToolAbortedError, () => new ToolAbortedError("t")],
  [ToolFailedError, () => new ToolFailedError("t", new Error("boom"))],
  [ToolTimeoutError, () => new ToolTimeoutError("t", 1)],
  [UnknownToolError, () => new UnknownToolError("t", ["a"])],
] as const;

describe("error brands", () => {
  it("InvalidInputError.isInstance is false for a timeout", () => {
    assert.equal(InvalidInputError.isInstance(new ToolTimeoutError("x", 1)), false);
  });

  it("each class recognises its own instances and no other class's", () => {
    for (const [guard] of classes) {
      for (const [other, make] of classes) {
        assert.equal(guard.isInstance(make()), guard === other, `${guard.name}.isInstance(${other.name})`);
      }
    }
  });

  it("ToolError.isInstance answers for every wire error, and only for those", () => {
    for (const [, make] of classes) assert.equal(ToolError.isInstance(make()), true);
    assert.equal(ToolError.isInstance(new ToolError("card_declined", "declined")), true);
    assert.equal(ToolError.isInstance(new Error("plain")), false);
    assert.equal(ToolError.isInstance({ code: "timeout", message: "looks like one" }), false);
    assert.equal(ToolError.isInstance(null), false);
  });

  it("a base ToolError with a core code is not the subclass", () => {
    const lookalike = new ToolError("timeout", "remote timeout", { data: { tool: "t", timeoutMs: 1 } });
    assert.equal(ToolTimeoutError.isInstance(lookalike), false);
  });

  it("recognises an error from another copy of the package, where instanceof fails", async () => {
    const copy = (await import(`./invalid-input-error.ts?copy=${Date.now()}`)) as {
      InvalidInputError: typeof InvalidInputError;
    };
    const foreign = new copy.InvalidInputError("t", issues);
    assert.equal(foreign instanceof InvalidInputError, false);
    assert.equal(InvalidInputError.isInstance(foreign), true);
    assert.equal(ToolError.isInstance(foreign), true);
    assert.equal(ToolTimeoutError.isInstance(foreign), false);
  });

  it("keeps brands out of logs and the wire form", () => {
    const error = new ToolTimeoutError("t", 5);
    assert.deepEqual(Object.getOwnPropertySymbols(error).length, 2); // its own brand and ToolError's
    assert.equal(JSON.stringify(error), JSON.stringify(error.toJSON()));
    assert.deepEqual(Object.keys({ ...error }).sort(), ["code", "data", "name", "retryable"].sort());
  });

  it("refuses to answer for a subclass that declares no brand of its own", () => {
    class Unbranded extends ToolError {}
    const error = new Unbranded("x", "y");
    assert.equal(ToolError.isInstance(error), true);
    assert.throws(() => Unbranded.isInstance(error), /declares no brand of its own/);
  });

  it("a subclass with its own brand narrows to itself", () => {
    class CardDeclined extends ToolError<"card_declined", { last4: string }> {
      static override readonly brand: symbol = Symbol.for("test.card-declined");
      constructor() {
        super("card_declined", "declined", { data: { last4: "4242" } });
      }
    }
    assert.equal(CardDeclined.isInstance(new CardDeclined()), true);
    assert.equal(CardDeclined.isInstance(new ToolError("card_declined", "declined")), false);
    assert.equal(ToolError.isInstance(new CardDeclined()), true);
  });

  it("a definition error is a local programming error, not a wire error", () => {
    const error = new ToolDefinitionError("duplicate_tool", "twice", { name: "a" });
    assert.equal(ToolDefinitionError.isInstance(error), true);
    assert.equal(ToolError.isInstance(error), false);
    assert.equal(ToolDefinitionError.isInstance(new InvalidInputError("t", issues)), false);
    assert.equal("toJSON" in error, false);
  });

  it("hasBrand checks the brand's value, not its presence", () => {
    const brand = Symbol.for("test.brand");
    assert.equal(hasBrand({ [brand]: true }, brand), true);
    assert.equal(hasBrand({ [brand]: "yes" }, brand), false);
    assert.equal(hasBrand(undefined, brand), false);
  });
});

it("isNotFound answers for a not_found error of any package, by resource when asked (ADR 0027)", () => {
  const missing = new ToolError("not_found", "No run for thread t", { data: { resource: "run", id: "t" } });
  assert.equal(isNotFound(missing), true);
  assert.equal(isNotFound(missing, "run"), true);
  assert.equal(isNotFound(missing, "document"), false);
  assert.equal(isNotFound(ToolError.fromPayload(JSON.parse(JSON.stringify(missing))), "run"), true);
  assert.equal(isNotFound(new ToolError("unknown_tool", "no such tool")), false);
  assert.equal(isNotFound({ code: "not_found" }), false, "a plain object is not a Tackle error");
});
