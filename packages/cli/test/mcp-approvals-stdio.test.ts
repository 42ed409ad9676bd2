/**
 * Approvals through elicitation on `tackle mcp --approve ledger.pay` (real children over stdio, the
 * SDK's client): a client that answers the form twice gets the first answer's outcome and the call
 * runs once; a form nobody answers before the approval expires leaves the call paused; a client that
 * goes away mid-form leaves it paused for another `tackle mcp` on the same home to approve.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import {
  type ElicitHandler,
  ledgerEnv,
  ledgerLines,
  openApprovals,
  output,
  until,
} from "./approvals-support.ts";
import { mainScript, tempHome } from "./tackle-process.ts";

const home = tempHome();
const clients: Client[] = [];

after(async () => {
  await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  home.remove();
});

async function connect(flags: readonly string[], elicit?: ElicitHandler): Promise<Client> {
  const client = new Client(
    { name: "approvals-stdio", version: "1.0.0" },
    elicit === undefined ? {} : { capabilities: { elicitation: {} } },
  );
  if (elicit !== undefined) client.setRequestHandler("elicitation/create", elicit as never);
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: ["--conditions=@tackle/source", mainScript, "mcp", "--approve", "ledger.pay", ...flags],
      env: ledgerEnv(home.path) as Record<string, string>,
      stderr: "pipe",
    }),
  );
  clients.push(client);
  return client;
}

test("a client that answers the form twice: the first answer holds, and the call runs once", async () => {
  let client: Client | undefined;
  const second: Promise<void>[] = [];
  client = await connect([], async (_request, context) => {
    // The same request answered again, differently, right after the first answer.
    second.push(
      new Promise((resolve) =>
        setTimeout(() => {
          void client?.transport
            ?.send({ jsonrpc: "2.0", id: context.mcpReq.id, result: { action: "decline" } })
            .then(resolve, resolve);
        }, 20),
      ),
    );
    return { action: "accept", content: { approve: true, memo: "twice" } };
  });
  const result = output(
    await client.callTool({ name: "ledger.pay", arguments: { to: "Eve", amount: 3 } }, { timeout: 60_000 }),
  );
  assert.deepEqual([result.paid, result.to], [3, "Eve"]);
  await Promise.all(second);
  // And once more through the approve tool: the call already ran; nothing runs again.
  const [approval] = [...(await openApprovals(client))];
  assert.equal(approval, undefined);
  assert.deepEqual(
    ledgerLines(home.path).filter((line) => line.to === "Eve"),
    [{ to: "Eve", amount: 3, memo: "twice" }],
  );
  // The server still answers after the stray second answer.
  assert.equal(
    Array.isArray(output(await client.callTool({ name: "tackle.approvals", arguments: {} })).approvals),
    true,
  );
});

test("no answer before the approval expires leaves the call paused; nothing runs until it is approved", async () => {
  const client = await connect(["--approval-expires", "2"], () => new Promise(() => {}));
  const started = Date.now();
  const paused = output(
    await client.callTool({ name: "ledger.pay", arguments: { to: "Fay", amount: 4 } }, { timeout: 60_000 }),
  );
  assert.equal(paused.status, "awaiting_approval");
  assert.ok(Date.now() - started >= 1_500, `answered after ${Date.now() - started} ms`);
  assert.match(String(paused.notAsked), /timed out/i);
  // Well past the expiry the call is still paused (never declined for want of an answer), and unrun.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const listed = await openApprovals(client);
  assert.ok(
    listed.some((open) => open.approval === paused.approval),
    JSON.stringify(listed),
  );
  assert.deepEqual(
    ledgerLines(home.path).filter((line) => line.to === "Fay"),
    [],
  );
  const approved = output(
    await client.callTool({
      name: "tackle.approve",
      arguments: { approval: paused.approval, approved: true },
    }),
  );
  assert.equal(approved.paid, 4);
  assert.deepEqual(
    ledgerLines(home.path).filter((line) => line.to === "Fay"),
    [{ to: "Fay", amount: 4 }],
  );
});

test("a client that goes away mid-form: another tackle mcp on the same home approves, and it runs once", async () => {
  let formShown: () => void = () => {};
  const shown = new Promise<void>((resolve) => {
    formShown = resolve;
  });
  const leaving = await connect([], async () => {
    formShown();
    return new Promise(() => {});
  });
  const call = leaving
    .callTool({ name: "ledger.pay", arguments: { to: "Gus", amount: 6 } }, { timeout: 60_000 })
    .catch((error: Error) => error);
  await shown;
  await leaving.close();
  assert.ok((await call) instanceof Error);

  const other = await connect([]);
  await until(
    async () => (await openApprovals(other)).some((open) => open.tool === "ledger.pay"),
    30_000,
    "listed",
  );
  const open = (await openApprovals(other)).find(
    (entry) => (entry.arguments as { to?: string }).to === "Gus",
  );
  const approved = output(
    await other.callTool({ name: "tackle.approve", arguments: { approval: open?.approval, approved: true } }),
  );
  assert.equal(approved.paid, 6);
  assert.deepEqual(
    ledgerLines(home.path).filter((line) => line.to === "Gus"),
    [{ to: "Gus", amount: 6 }],
  );
});
