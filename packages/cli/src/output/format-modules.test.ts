import assert from "node:assert/strict";
import { test } from "node:test";
import { createPaint } from "./colour.ts";
import { formatModules } from "./format-modules.ts";

const modules = [
  {
    module: "alpha",
    status: "ok" as const,
    node: "a",
    tools: [{ name: "echo", description: "", inputSchema: {} }],
    errors: [],
  },
  {
    module: "beta",
    status: "unreachable" as const,
    tools: [],
    errors: [{ source: "tackle.tools.beta.tools", message: "no responders" }],
  },
];

test("the table lines up, shows every module and its errors beneath", () => {
  const plain = createPaint({ isTTY: false } as NodeJS.WriteStream);
  assert.equal(
    formatModules(modules, plain),
    [
      "MODULE  STATUS       NODE  TOOLS",
      "alpha   ok           a     echo",
      "beta    unreachable  -     -",
      "  tackle.tools.beta.tools: no responders",
      "",
    ].join("\n"),
  );
  assert.equal(formatModules([], plain), "No modules.\n");
});

test("colour appears only on a terminal, and NO_COLOR turns it off", () => {
  const terminal = { isTTY: true } as NodeJS.WriteStream;
  assert.ok(formatModules(modules, createPaint(terminal, {})).includes("\u001b[33munreachable"));
  assert.ok(!formatModules(modules, createPaint(terminal, { NO_COLOR: "1" })).includes("\u001b["));
});
