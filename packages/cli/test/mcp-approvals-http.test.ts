/**
 * Approvals through elicitation on the console (`tackle serve --approve ledger.pay`, a real process,
 * MCP over HTTP with the SDK's client): a client that can elicit is asked in a form holding the call's
 * editable arguments; accepting runs the call once with the edits, declining rejects it with the reason;
 * a client that cannot elicit, or that went away mid-form, leaves the call paused for `tackle.approve`.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { freePort } from "@tackle/test-support";
import { readConsoleToken } from "../src/console/console-token.ts";
import {
  consoleClient,
  type ElicitHandler,
  ledgerEnv,
  ledgerLines,
  openApprovals,
  output,
  until,
} from "./approvals-support.ts";
import { type ServeProcess, startServe, tempHome } from "./tackle-process.ts";

const home = tempHome();
let serve: ServeProcess | undefined;
const clients: Client[] = [];

before(async () => {
  serve = await startServe(
    ["--approve", "ledger.pay", "--listen", `127.0.0.1:${await freePort()}`],
    ledgerEnv(home.path),
  );
});

after(async () => {
  await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  await serve?.stop();
  home.remove();
});

async function connect(elicit?: ElicitHandler): Promise<Client> {
  const client = await consoleClient(serve, "approvals-http", elicit);
  clients.push(client);
  return client;
}

const pay = (to: string, amount: number) => ({
  name: "ledger.pay",
  arguments: { to, amount, tags: ["march"] },
});

test("accepting the form runs the call once, with the arguments the person edited", async () => {
  const asked: Record<string, unknown>[] = [];
  const client = await connect(async (request) => {
    asked.push(request.params as Record<string, unknown>);
    return { action: "accept", content: { approve: true, amount: 12.5, to: "Ada", reason: "checked" } };
  });
  const { tools } = await client.listTools();
  assert.match(tools.find((tool) => tool.name === "ledger.pay")?.description ?? "", /approves each call/);
  assert.ok(tools.some((tool) => tool.name === "tackle.approve"));

  const result = await client.callTool(pay("Ada", 40), { timeout: 60_000 });
  assert.equal(result.isError, undefined, JSON.stringify(result));
  assert.deepEqual([output(result).paid, output(result).to], [12.5, "Ada"]);
  assert.equal(asked.length, 1);
  const schema = asked[0]?.requestedSchema as { properties: Record<string, { default?: unknown }> };
  // The editable arguments are prefilled with the call's; the array is not a form field (it runs as asked).
  assert.equal(schema.properties.amount?.default, 40);
  assert.equal(schema.properties.to?.default, "Ada");
  assert.equal(schema.properties.tags, undefined);
  assert.match(String(asked[0]?.message), /ledger\.pay/);
  assert.deepEqual(
    ledgerLines(home.path).filter((line) => line.to === "Ada"),
    [{ to: "Ada", amount: 12.5 }],
  );
  assert.deepEqual(await openApprovals(client), []);
});

test("declining, or rejecting in the form, runs nothing and tells the caller why", async () => {
  let answer: { action: "accept" | "decline"; content?: Record<string, unknown> } = { action: "decline" };
  const client = await connect(async () => answer);
  const declined = output(await client.callTool(pay("Bob", 5), { timeout: 60_000 }));
  assert.deepEqual(declined, { declined: true, reason: "declined at the client" });
  answer = { action: "accept", content: { approve: false, reason: "not this month" } };
  const rejected = output(await client.callTool(pay("Bob", 6), { timeout: 60_000 }));
  assert.deepEqual(rejected, { declined: true, reason: "not this month" });
  assert.deepEqual(
    ledgerLines(home.path).filter((line) => line.to === "Bob"),
    [],
  );
});

test("a client without elicitation gets the paused call; tackle.approve runs it once, a second answer changes nothing", async () => {
  const client = await connect();
  const paused = output(await client.callTool(pay("Cy", 7)));
  assert.equal(paused.status, "awaiting_approval");
  assert.match(String(paused.next), /tackle\.approve/);
  const id = String(paused.approval);
  assert.deepEqual(
    (await openApprovals(client)).map((open) => [open.approval, open.tool]),
    [[id, "ledger.pay"]],
  );
  assert.deepEqual(
    ledgerLines(home.path).filter((line) => line.to === "Cy"),
    [],
  );

  // An edit the tool's schema refuses is refused, and the call stays open.
  const refused = await client.callTool({
    name: "tackle.approve",
    arguments: { approval: id, approved: true, arguments: { to: "Cy", amount: 5000 } },
  });
  assert.equal(refused.isError, true);
  assert.match(JSON.stringify(refused.content), /invalid_edit|schema/);
  assert.equal((await openApprovals(client)).length, 1);

  const approved = await client.callTool({
    name: "tackle.approve",
    arguments: { approval: id, approved: true, arguments: { to: "Cy", amount: 8, memo: "edited" } },
  });
  assert.deepEqual([output(approved).paid, output(approved).to], [8, "Cy"]);
  const again = output(
    await client.callTool({
      name: "tackle.approve",
      arguments: { approval: id, approved: false, reason: "late" },
    }),
  );
  assert.equal(again.alreadyAnswered, true);
  assert.deepEqual(
    ledgerLines(home.path).filter((line) => line.to === "Cy"),
    [{ to: "Cy", amount: 8, memo: "edited" }],
  );
});

test("a client that goes away mid-form leaves the call paused; another client approves it, and it runs once", async () => {
  let formShown: () => void = () => {};
  const shown = new Promise<void>((resolve) => {
    formShown = resolve;
  });
  const leaving = await connect(async () => {
    formShown();
    return new Promise(() => {}); // the person never answers; the client closes instead
  });
  const call = leaving.callTool(pay("Dee", 9), { timeout: 60_000 }).catch((error: Error) => error);
  await shown;
  await leaving.close();
  assert.ok((await call) instanceof Error, "the closed client's call ends");

  const other = await connect();
  await until(
    async () => (await openApprovals(other)).some((open) => open.tool === "ledger.pay"),
    30_000,
    "listed",
  );
  const [open] = await openApprovals(other);
  assert.deepEqual(open?.arguments, { to: "Dee", amount: 9, tags: ["march"] });
  const approved = await other.callTool({
    name: "tackle.approve",
    arguments: { approval: open?.approval, approved: true },
  });
  assert.equal(output(approved).paid, 9);
  assert.deepEqual(
    ledgerLines(home.path).filter((line) => line.to === "Dee"),
    [{ to: "Dee", amount: 9 }],
  );
});

test("a 2026-07-28 request (no mid-call elicitation) gets the paused call, and tackle.approve runs it", async () => {
  const client = new Client(
    { name: "approvals-modern", version: "1.0.0" },
    { versionNegotiation: { mode: { pin: "2026-07-28" } }, capabilities: { elicitation: {} } },
  );
  let asked = 0;
  client.setRequestHandler("elicitation/create", (async () => {
    asked += 1;
    return { action: "accept", content: { approve: true } };
  }) as never);
  const headers = { authorization: `Bearer ${readConsoleToken(serve?.tokenFile ?? "")}` };
  await client.connect(
    new StreamableHTTPClientTransport(new URL(serve?.url ?? ""), { requestInit: { headers } }),
  );
  clients.push(client);
  const paused = output(await client.callTool(pay("Hal", 2)));
  assert.equal(paused.status, "awaiting_approval");
  assert.equal(asked, 0);
  const approved = output(
    await client.callTool({
      name: "tackle.approve",
      arguments: { approval: paused.approval, approved: true },
    }),
  );
  assert.equal(approved.paid, 2);
  assert.deepEqual(
    ledgerLines(home.path).filter((line) => line.to === "Hal"),
    [{ to: "Hal", amount: 2 }],
  );
});
