/**
 * The console's boundary, walked over every route its web app registers (and MCP), so a new route
 * gets the attacker's checks without anyone writing them: a rebound Host or a foreign Origin is
 * refused even with a session and the token; without a session or the token only the page's shell and
 * its assets answer, and they carry no secret; a state-changing request from another loopback port is
 * refused; no answer ever allows another origin to read it (no CORS), preflight included, and every
 * answer forbids other origins to load it at all (Cross-Origin-Resource-Policy, nosniff).
 */
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, test } from "node:test";
import { createToolSet, silentLogger } from "@tackle/core";
import { type RunningConsole, startConsole } from "../src/console/start-console.ts";
import { createConsoleSessions } from "../src/console/web/console-sessions.ts";
import { createWebApp } from "../src/console/web/create-web-app.ts";
import demoTools from "../src/modules/demo.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";

const token = "console-boundary-token-0123456789";
const source = () =>
  createEmbeddedToolSource([
    { module: "demo", toolset: createToolSet(demoTools), errors: [], close: () => {} },
  ]);
let server: RunningConsole;
let cookie = "";
let self = "";

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** One raw request (a raw one, so Host can be anything), read for at most a moment. */
function send(method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      {
        host: "127.0.0.1",
        port: server.port,
        method,
        path,
        headers: {
          host: `127.0.0.1:${server.port}`,
          ...(body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) }),
          ...headers,
        },
        timeout: 10_000,
      },
      (response) => {
        let text = "";
        response.setEncoding("utf8").on("data", (chunk: string) => {
          text += chunk;
        });
        const done = () => {
          // Every answer of the port, refusals included: no page of another origin may load it.
          assert.equal(response.headers["cross-origin-resource-policy"], "same-origin", `${method} ${path}`);
          assert.equal(response.headers["x-content-type-options"], "nosniff", `${method} ${path}`);
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text });
        };
        response.on("end", done);
        // A stream (SSE) that was let through is read for a moment, then dropped.
        setTimeout(() => {
          response.destroy();
          done();
        }, 1_000).unref();
      },
    );
    outgoing.on("timeout", () => outgoing.destroy(new Error(`${method} ${path} did not answer`)));
    outgoing.on("error", reject);
    outgoing.end(body);
  });
}

before(async () => {
  server = await startConsole({
    source: source(),
    listen: { host: "127.0.0.1", port: 0 },
    token,
    logger: silentLogger,
  });
  self = `http://127.0.0.1:${server.port}`;
  const signedIn = await send(
    "POST",
    "/api/session",
    { origin: self, "content-type": "application/json" },
    JSON.stringify({ token }),
  );
  assert.equal(signedIn.status, 200, signedIn.body);
  cookie = String(signedIn.headers["set-cookie"]).split(";")[0] ?? "";
  assert.match(cookie, /^tackle_console=/);
});
after(() => server.close());

/** Every (method, path) the console answers: its web app's routes, from the app itself, and MCP. */
async function consoleRoutes(): Promise<{ method: string; path: string }[]> {
  const web = createWebApp({
    source: source(),
    token,
    sessions: createConsoleSessions({ token }),
    logger: silentLogger,
  });
  try {
    const seen = new Map<string, { method: string; path: string }>();
    for (const route of web.app.routes) {
      if (route.method === "ALL") continue;
      seen.set(`${route.method} ${route.path}`, { method: route.method, path: route.path });
    }
    seen.set("POST /mcp", { method: "POST", path: "/mcp" });
    seen.set("GET /mcp", { method: "GET", path: "/mcp" });
    seen.set("DELETE /mcp", { method: "DELETE", path: "/mcp" });
    return [...seen.values()];
  } finally {
    await web.close();
  }
}

const concrete = (path: string) =>
  path
    .replace(":name", "console.ts")
    .replace(":threadId", "demo-x")
    .replace(":runId", "run-x")
    .replace(":graph", "demo-refund");

const publicRoutes = new Set(["GET /", "GET /assets/:name"]);
const stateChanging = (method: string) => method !== "GET" && method !== "HEAD";

test("every route: a rebound Host or a foreign Origin gets 403, with the session cookie and the token", async () => {
  const routes = await consoleRoutes();
  assert.ok(routes.length >= 20, `only ${routes.length} routes found`);
  for (const { method, path } of routes) {
    const where = `${method} ${path}`;
    const at = concrete(path);
    const full = { cookie, authorization: `Bearer ${token}`, "content-type": "application/json" };
    const body = stateChanging(method) ? "{}" : undefined;
    for (const host of [
      "evil.example",
      `localhost.evil.example:${server.port}`,
      `127.0.0.1.nip.io:${server.port}`,
    ]) {
      const rebound = await send(method, at, { ...full, host }, body);
      assert.equal(rebound.status, 403, `${where} with Host ${host}: ${rebound.body}`);
    }
    for (const origin of ["http://evil.example", "null"]) {
      const foreign = await send(method, at, { ...full, origin }, body);
      assert.equal(foreign.status, 403, `${where} from ${origin}: ${foreign.body}`);
    }
  }
});

test("every route: without a session or the token only the shell and its assets answer, and they hold no secret", async () => {
  const routes = await consoleRoutes();
  const outside = routes
    .map((route) => `${route.method} ${route.path}`)
    .filter((route) => !route.includes(" /api/") && !route.endsWith(" /mcp") && !publicRoutes.has(route));
  assert.deepEqual(outside, [], "a route outside /api and /mcp is public: add it to the walk on purpose");
  for (const { method, path } of routes) {
    const where = `${method} ${path}`;
    const at = concrete(path);
    const headers = { origin: self, "content-type": "application/json" };
    const body = stateChanging(method) ? "{}" : undefined;
    for (const credentials of [
      {},
      { cookie: "tackle_console=forged-session-id" },
      { authorization: "Bearer wrong" },
    ]) {
      const answer = await send(method, at, { ...headers, ...credentials }, body);
      if (publicRoutes.has(where)) {
        assert.equal(answer.status, 200, where);
      } else if (where === "POST /api/session") {
        assert.equal(answer.status, 401, `${where}: a wrong or missing code signs nobody in`);
        assert.equal(answer.headers["set-cookie"], undefined);
      } else {
        assert.equal(answer.status, 401, `${where} with ${JSON.stringify(credentials)}: ${answer.body}`);
      }
      assert.ok(!answer.body.includes(token), `${where} answered the token`);
      assert.ok(
        !answer.body.includes(server.signInUrl.split("#login=")[1] ?? "-"),
        `${where} answered the sign-in code`,
      );
    }
  }
});

test("every state-changing route: a page on another loopback port is refused, even with the session cookie", async () => {
  const otherPort = `http://127.0.0.1:${server.port + 1}`;
  for (const { method, path } of await consoleRoutes()) {
    if (!stateChanging(method) || path === "/mcp") continue;
    const answer = await send(
      method,
      concrete(path),
      { cookie, origin: otherPort, "content-type": "application/json" },
      "{}",
    );
    assert.equal(answer.status, 403, `${method} ${path}: ${answer.body}`);
    assert.match(answer.body, /is not this console/);
  }
  // The session still works from the console's own page.
  const own = await send("GET", "/api/session", { cookie });
  assert.equal(own.status, 200);
});

test("no answer lets another origin read it: no CORS header on any route, preflight included", async () => {
  const otherPort = `http://127.0.0.1:${server.port + 1}`;
  for (const { method, path } of await consoleRoutes()) {
    const at = concrete(path);
    const preflight = await send("OPTIONS", at, {
      origin: otherPort,
      "access-control-request-method": method,
      "access-control-request-headers": "authorization, content-type",
    });
    const read = await send(
      method === "GET" ? "GET" : method,
      at,
      { cookie, origin: otherPort },
      stateChanging(method) ? "{}" : undefined,
    );
    for (const answer of [preflight, read]) {
      const allowed = Object.keys(answer.headers).filter((name) => name.startsWith("access-control-allow"));
      assert.deepEqual(allowed, [], `${method} ${path} allows another origin: ${allowed.join(", ")}`);
    }
  }
});
