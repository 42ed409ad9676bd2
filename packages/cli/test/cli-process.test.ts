/** `tackle tools`, `tackle call` and `tackle serve` as real processes, embedded and through a console. */
import assert from "node:assert/strict";
import { statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { freePort } from "@tackle/test-support";
import { largeValue, longText, pictureData } from "./fixtures/large-results-bundle.ts";
import { cleanEnv, runTackle, type ServeProcess, startServe, tempHome } from "./tackle-process.ts";

const brokenBundle = fileURLToPath(new URL("./fixtures/broken-bundle.js", import.meta.url));
const slowBundle = fileURLToPath(new URL("./fixtures/slow-bundle.mjs", import.meta.url));
const largeBundle = fileURLToPath(new URL("./fixtures/large-results-bundle.ts", import.meta.url));

describe("without a console: the modules load in the command's own process", () => {
  test("tackle tools lists the built-in demo module, and --json is machine-readable on stdout alone", async () => {
    const table = await runTackle(["tools"]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /^MODULE\s+STATUS\s+NODE\s+TOOLS$/m);
    assert.match(table.stdout, /^demo\s+ok\s+-\s+echo, add, now, text_stats$/m);
    assert.ok(!table.stdout.includes("\u001b["), "no colour on a pipe");

    const json = await runTackle(["tools", "--json"], { env: cleanEnv({ TACKLE_LOG_LEVEL: "debug" }) });
    const modules = JSON.parse(json.stdout) as {
      module: string;
      status: string;
      tools: { name: string }[];
    }[];
    // memory and docscript join the built-ins when their bundles land; demo is always there.
    const demo = modules.find((info) => info.module === "demo");
    assert.deepEqual([demo?.status, demo?.tools.length], ["ok", 4]);
  });

  test("a module whose bundle throws is reported with its error, and the others still serve", async () => {
    const env = cleanEnv({ MESH_TOOL_MODULES: `broken=${brokenBundle}`, TACKLE_LOG_LEVEL: "silent" });
    // A failed module makes the listing exit 1 (it exited 0), with the whole table still printed.
    const tools = await runTackle(["tools", "--builtin"], { env });
    assert.equal(tools.code, 1, tools.stderr);
    assert.match(tools.stdout, /^broken\s+failed\s+-\s+-$/m);
    assert.match(tools.stdout, /broken-bundle\.js: .*broken on purpose/);
    assert.match(tools.stdout, /^demo\s+ok/m);
    assert.match(tools.stderr, /1 module not ok: broken \(failed\) \(--allow-unhealthy to exit 0\)/);
    const relaxed = await runTackle(["tools", "--builtin", "--json", "--allow-unhealthy"], { env });
    assert.equal(relaxed.code, 0, relaxed.stderr);
    assert.equal(
      (JSON.parse(relaxed.stdout) as { module: string }[]).some((info) => info.module === "broken"),
      true,
    );
  });

  test("tackle call takes its arguments from the argument or from stdin and prints the result as JSON", async () => {
    const fromArgument = await runTackle(["call", "demo.add", '{"numbers":[1.5,2]}']);
    assert.equal(fromArgument.code, 0, fromArgument.stderr);
    assert.deepEqual(JSON.parse(fromArgument.stdout), { sum: 3.5 });

    const fromStdin = await runTackle(["call", "demo.text_stats"], { input: '{"text":"one two three"}' });
    assert.equal(fromStdin.code, 0, fromStdin.stderr);
    assert.equal((JSON.parse(fromStdin.stdout) as { words: number }).words, 3);
  });

  test("a tool error goes to stderr with its code and exit 1; bad usage exits 2; stdout stays empty", async () => {
    const invalid = await runTackle(["call", "demo.add", '{"numbers":"many"}']);
    assert.equal(invalid.code, 1);
    assert.equal(invalid.stdout, "");
    assert.match(invalid.stderr, /^error invalid_input: Invalid input for tool "demo\.add": /m);
    assert.match(invalid.stderr, /"tool": "demo\.add"/);

    const unknown = await runTackle(["call", "demo.subtract", "{}"]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /error unknown_tool: .*demo\.add/);

    const notJson = await runTackle(["call", "demo.echo", "{text:"]);
    assert.equal(notJson.code, 2);
    assert.match(notJson.stderr, /not JSON/);

    const notQualified = await runTackle(["call", "echo", "{}"]);
    assert.equal(notQualified.code, 2);
    assert.match(notQualified.stderr, /not module\.tool/);
  });

  test("--help works on every command and exits 0", async () => {
    const commands = [
      ["--help"],
      ["serve", "--help"],
      ["mcp", "--help"],
      ["tools", "--help"],
      ["call", "--help"],
      ["mesh", "--help"],
      ["mesh", "issue", "--help"],
      ["mesh", "revoke", "--help"],
      ["mesh", "ls", "--help"],
    ];
    // Nine processes at once: on a loaded 2-core machine each may take well over the default 30 s.
    const results = await Promise.all(commands.map((args) => runTackle(args, { timeoutMs: 120_000 })));
    for (const [index, help] of results.entries()) {
      const args = commands[index]!.join(" ");
      assert.equal(help.code, 0, `${args}: ${help.stderr}`);
      assert.match(help.stdout, /^Usage: tackle/m, args);
    }
  });
});

describe("without a console: an unanswering broker, and a console off loopback", () => {
  test("a broker that does not answer is named, with the variable that points at it", async () => {
    const port = await freePort();
    for (const args of [["tools"], ["call", "demo.echo", "{}"], ["mesh", "ls"]]) {
      const refused = await runTackle(args, {
        env: cleanEnv({ MESH_BROKER_URL: `nats://127.0.0.1:${port}` }),
      });
      assert.equal(refused.code, 1, args.join(" "));
      assert.match(
        refused.stderr,
        new RegExp(`Cannot reach nats://127\\.0\\.0\\.1:${port} \\(MESH_BROKER_URL\\)`),
      );
    }
  });

  test("a broker that does not answer is named without the password its URL carries", async () => {
    const port = await freePort();
    const refused = await runTackle(["tools"], {
      env: cleanEnv({ MESH_BROKER_URL: `nats://alice:s3cret-pass@127.0.0.1:${port}` }),
    });
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      new RegExp(`Cannot reach nats://\\*\\*\\*@127\\.0\\.0\\.1:${port} \\(MESH_BROKER_URL\\)`),
    );
    assert.ok(!refused.stderr.includes("s3cret-pass"), refused.stderr);
  });

  test("--console off loopback is refused before any request carries the console token", async () => {
    // 192.0.2.1 is TEST-NET-1: nothing answers there, so only a refusal up front ends the command quickly.
    const started = Date.now();
    const refused = await runTackle(["tools", "--console", "http://192.0.2.1:4270/mcp"], {
      env: cleanEnv({ TACKLE_CONSOLE_TOKEN: "console-token-for-this-machine" }),
    });
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(
      refused.stderr,
      /--console http:\/\/192\.0\.2\.1:4270 refused: a console answers on loopback only/,
    );
    assert.ok(Date.now() - started < 8_000, "refused without trying to connect");
  });
});

describe("npm start (tackle serve --builtin), then tools and call through its console", () => {
  const home = tempHome();
  let serve: ServeProcess;
  let port: number;

  before(async () => {
    port = await freePort();
    // The README's own command, plus one module that fails to load, which the banner must name.
    serve = await startServe(
      [],
      cleanEnv({
        TACKLE_HOME: home.path,
        MESH_CONSOLE_LISTEN: `127.0.0.1:${port}`,
        MESH_TOOL_MODULES: `broken=${brokenBundle},slow=${slowBundle},large=${largeBundle}`,
      }),
      undefined,
      { viaNpmStart: true },
    );
  });
  after(async () => {
    await serve?.stop();
    home.remove();
  });

  test("serve prints its modules, tool counts, the console URL and the token file (0600)", () => {
    assert.match(serve.banner, /^tackle serve: embedded/m);
    assert.match(serve.banner, /^ {2}module demo: ok, 4 tools$/m);
    assert.match(serve.banner, /^ {2}module memory: ok, 27 tools$/m);
    assert.match(serve.banner, /^ {2}module docscript: ok, \d+ tools$/m);
    assert.match(serve.banner, /^ {2}module broken: failed\b.*$/m);
    assert.equal(serve.url, `http://127.0.0.1:${port}/mcp`);
    assert.equal(serve.tokenFile, `${home.path}/console-token`);
    assert.equal(statSync(serve.tokenFile).mode & 0o777, 0o600);
  });

  test("tackle call --console returns the tool's result; tackle tools --console lists the modules", async () => {
    const env = cleanEnv({ TACKLE_HOME: home.path });
    const call = await runTackle(
      ["call", "demo.echo", '{"text":"through the console"}', "--console", serve.url],
      { env },
    );
    assert.equal(call.code, 0, call.stderr);
    assert.deepEqual(JSON.parse(call.stdout), { text: "through the console" });

    const bareOrigin = await runTackle(
      ["call", "demo.add", '{"numbers":[40,2]}', "--console", `http://127.0.0.1:${port}`],
      { env },
    );
    assert.deepEqual(JSON.parse(bareOrigin.stdout), { sum: 42 });

    const failing = await runTackle(["call", "demo.add", "{}", "--console", serve.url], { env });
    assert.equal(failing.code, 1);
    assert.equal(failing.stdout, "");
    assert.match(failing.stderr, /^error invalid_input: Invalid input for tool "demo\.add": /m);
    assert.match(failing.stderr, /"tool": "demo\.add"/);

    const tools = await runTackle(["tools", "--console", serve.url, "--allow-unhealthy"], { env });
    assert.equal(tools.code, 0, tools.stderr);
    assert.match(tools.stdout, /^demo\s+ok\s+-\s+echo, add, now, text_stats$/m);
  });

  test("tackle call prints a text-only content result as its text and other blocks as JSON, embedded and through --console", async () => {
    const env = cleanEnv({ TACKLE_HOME: home.path, MESH_TOOL_MODULES: `large=${largeBundle}` });
    for (const through of [[], ["--console", serve.url]]) {
      const text = await runTackle(["call", "large.text", '{"lines":2}', ...through], { env });
      assert.equal(text.code, 0, text.stderr);
      assert.equal(text.stdout, `${longText(2)}\n`, `through ${through.join(" ") || "embedded"}`);

      const pictures = await runTackle(["call", "large.pictures", '{"count":1}', ...through], { env });
      assert.equal(pictures.code, 0, pictures.stderr);
      assert.deepEqual(JSON.parse(pictures.stdout), {
        content: [
          { type: "text", text: "1 pictures" },
          { type: "image", data: pictureData, mimeType: "image/png" },
        ],
      });

      const structured = await runTackle(["call", "large.json", '{"count":2}', ...through], { env });
      assert.equal(structured.code, 0, structured.stderr);
      assert.deepEqual(JSON.parse(structured.stdout), largeValue(2));
    }
  });

  test("--console with a wrong token is refused with a clear message", async () => {
    const env = cleanEnv({ TACKLE_HOME: home.path, TACKLE_CONSOLE_TOKEN: "wrong" });
    const refused = await runTackle(["tools", "--console", serve.url], { env });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /refused the token \(401\): it does not match the console's token file/);
  });

  test("call --console --timeout: a tool past it fails as timeout, naming the tool, not as a console failure", async () => {
    const late = await runTackle(
      ["call", "slow.wait", '{"ms":5000}', "--timeout", "300", "--console", serve.url],
      { env: cleanEnv({ TACKLE_HOME: home.path }) },
    );
    assert.equal(late.code, 1);
    assert.match(late.stderr, /^error timeout: Tool "slow\.wait" timed out after 300 ms$/m);
  });

  test("a second serve on the same port says the port is in use", async () => {
    const second = await runTackle(["serve"], {
      env: cleanEnv({ TACKLE_HOME: home.path, MESH_CONSOLE_LISTEN: `127.0.0.1:${port}` }),
    });
    assert.equal(second.code, 1);
    assert.match(second.stderr, /port is in use/);
  });
});

test("serve refuses MESH_CONSOLE_LISTEN=0.0.0.0:4270 before binding, naming the fix", async () => {
  const home = tempHome();
  try {
    const refused = await runTackle(["serve"], {
      env: cleanEnv({ TACKLE_HOME: home.path, MESH_CONSOLE_LISTEN: "0.0.0.0:4270" }),
    });
    assert.equal(refused.code, 2);
    assert.equal(refused.stdout, "");
    assert.match(
      refused.stderr,
      /MESH_CONSOLE_LISTEN: 0\.0\.0\.0:4270 refused: the console answers on loopback only/,
    );
    const flag = await runTackle(["serve", "--listen", "192.168.0.1:4270"], {
      env: cleanEnv({ TACKLE_HOME: home.path }),
    });
    assert.equal(flag.code, 2);
    assert.match(flag.stderr, /loopback only/);
  } finally {
    home.remove();
  }
});

test("--console without a token file says to start the console first, not ENOENT", async () => {
  const home = tempHome();
  try {
    const refused = await runTackle(["tools", "--console", "http://127.0.0.1:9/mcp"], {
      env: cleanEnv({ TACKLE_HOME: home.path }),
    });
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      new RegExp(
        `No console token file at ${home.path}/console-token, so http://127\\.0\\.0\\.1:9/mcp cannot be asked: start the console first`,
      ),
    );
    assert.doesNotMatch(refused.stderr, /ENOENT/);
  } finally {
    home.remove();
  }
});

test("a corrupt console-runs.sqlite: MCP still serves, the page answers 503 naming the file", async () => {
  const home = tempHome();
  writeFileSync(
    join(home.path, "console-runs.sqlite"),
    "not a SQLite file, only text long enough for a header",
  );
  const serve = await startServe(
    [],
    cleanEnv({ TACKLE_HOME: home.path, MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}` }),
  );
  try {
    const page = await fetch(new URL("/", serve.url), { signal: AbortSignal.timeout(20_000) });
    assert.equal(page.status, 503);
    const body = (await page.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, "page_unavailable");
    assert.match(body.error.message, /console-runs\.sqlite: file is not a database/);
    const call = await runTackle(["call", "demo.add", '{"numbers":[2,40]}', "--console", serve.url], {
      env: cleanEnv({ TACKLE_HOME: home.path }),
    });
    assert.equal(call.code, 0, call.stderr);
    assert.deepEqual(JSON.parse(call.stdout), { sum: 42 });
    assert.equal(await serve.stop(), 0);
    assert.doesNotMatch(serve.stderr(), /close failed/);
  } finally {
    await serve.stop();
    home.remove();
  }
});

test("serve with TACKLE_HOME naming a file says so before opening any store", async () => {
  const home = tempHome();
  try {
    const file = join(home.path, "not-a-folder");
    writeFileSync(file, "x");
    const refused = await runTackle(["serve"], {
      env: cleanEnv({ TACKLE_HOME: file, MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}` }),
    });
    assert.equal(refused.code, 2);
    assert.equal(refused.stdout, "");
    assert.match(refused.stderr, new RegExp(`${file} is not a folder: .*set TACKLE_HOME to a folder`));
    assert.doesNotMatch(refused.stderr, /ENOTDIR|EEXIST/);
  } finally {
    home.remove();
  }
});

test("serve stops cleanly on SIGINT", async () => {
  const home = tempHome();
  const port = await freePort();
  const serve = await startServe(
    [],
    cleanEnv({ TACKLE_HOME: home.path, MESH_CONSOLE_LISTEN: `127.0.0.1:${port}` }),
  );
  try {
    assert.equal(await serve.stop("SIGINT"), 0);
  } finally {
    home.remove();
  }
});
