/**
 * Approvals answered at once from everywhere, as a property against an oracle: calls of
 * `ledger.pay` (`--approve ledger.pay`) made on a console (HTTP) and on a `tackle mcp` (stdio) sharing
 * one home, so one runs store; each answered by one to four answers sent together from clients of
 * both processes (approve, approve with an edited amount, reject), some calls raced by the caller's
 * own form (elicitation) against another process's `tackle.approve`. Whatever the interleaving:
 * the tool ran at most once, and once exactly when the answer that won approved it, with that answer's
 * amount; every answer tells the one outcome (the winner its result, every other `alreadyAnswered`
 * with the same result), never a different or an unfinished one; nothing stays open once answered.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { freePort, seededRandom } from "@tackle/test-support";
import {
  consoleClient,
  type ElicitHandler,
  ledgerEnv,
  ledgerLines,
  openApprovals,
  output,
} from "./approvals-support.ts";
import { mainScript, type ServeProcess, startServe, tempHome } from "./tackle-process.ts";

/** Calls per run of the property (`APPROVAL_RACE_CALLS` for more); each takes one to four answers. */
const calls = Number(process.env.APPROVAL_RACE_CALLS ?? 400);
/** Calls under way at once. */
const parallel = 8;

const home = tempHome();
let serve: ServeProcess | undefined;
const clients: Client[] = [];

/** A failing run names the seed that repeats it. */
const seed = Number(process.env.APPROVAL_RACE_SEED ?? Date.now() % 100_000);

/** What the person at the form answers, per call (`to`), set before the call is made. */
const formAnswers = new Map<string, { delayMs: number; answer: Record<string, unknown> }>();

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

async function httpClient(elicit?: ElicitHandler): Promise<Client> {
  const client = await consoleClient(serve, "approvals-race", elicit);
  clients.push(client);
  return client;
}

async function stdioClient(): Promise<Client> {
  const client = new Client({ name: "approvals-race-stdio", version: "1.0.0" });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: ["--conditions=@tackle/source", mainScript, "mcp", "--approve", "ledger.pay"],
      env: ledgerEnv(home.path) as Record<string, string>,
      stderr: "pipe",
    }),
  );
  clients.push(client);
  return client;
}

/** The form's answer for the call it names (its message holds the call's arguments). */
const formHandler: ElicitHandler = async (request) => {
  const to = /"to":"([^"]+)"/.exec(String(request.params.message))?.[1] ?? "";
  const planned = formAnswers.get(to);
  if (planned === undefined) return { action: "decline" };
  await new Promise((resolve) => setTimeout(resolve, planned.delayMs));
  return planned.answer;
};

interface Answer {
  /** What the answer says: approve (with an amount, or the call's own), or reject. */
  readonly approved: boolean;
  readonly amount?: number;
  /** What it was told back. */
  told?: Record<string, unknown>;
  toldError?: string;
}

/** One call: made paused (or through a form), answered by every answer in `answers` at once. */
async function round(
  index: number,
  next: () => number,
  answerers: readonly Client[],
  caller: Client,
  formCaller: Client,
): Promise<{ to: string; asked: number; answers: Answer[] }> {
  const to = `payee-${index}`;
  const asked = 1 + Math.floor(next() * 900);
  const answers: Answer[] = Array.from({ length: 1 + Math.floor(next() * 4) }, () => {
    const approved = next() < 0.6;
    return approved && next() < 0.5 ? { approved, amount: 1 + Math.floor(next() * 900) } : { approved };
  });
  const send = (answer: Answer, approval: string) =>
    (answerers[Math.floor(next() * answerers.length)] as Client)
      .callTool({
        name: "tackle.approve",
        arguments: {
          approval,
          approved: answer.approved,
          ...(answer.amount === undefined ? {} : { arguments: { to, amount: answer.amount } }),
          ...(answer.approved ? {} : { reason: `no ${index}` }),
        },
      })
      .then((result) => {
        if (result.isError === true) answer.toldError = JSON.stringify(result.content);
        else answer.told = output(result);
      });

  if (next() < 0.3) {
    // The caller's own form races the answers sent from the other process.
    const form: Answer =
      next() < 0.6 ? { approved: true, amount: 1 + Math.floor(next() * 900) } : { approved: false };
    formAnswers.set(to, {
      delayMs: Math.floor(next() * 40),
      answer: form.approved
        ? { action: "accept", content: { approve: true, amount: form.amount, to } }
        : { action: "decline" },
    });
    const called = formCaller.callTool(
      { name: "ledger.pay", arguments: { to, amount: asked } },
      { timeout: 60_000 },
    );
    const approval = await approvalFor(to, answerers[0] as Client);
    await Promise.all([
      called.then((result) => {
        if (result.isError === true) form.toldError = JSON.stringify(result.content);
        else form.told = output(result);
      }),
      ...answers.map((answer) => (approval === undefined ? undefined : send(answer, approval))),
    ]);
    // A form's decline is told as the declined call; an answer never sent was not an answer.
    return { to, asked, answers: [form, ...(approval === undefined ? [] : answers)] };
  }
  const paused = output(await caller.callTool({ name: "ledger.pay", arguments: { to, amount: asked } }));
  assert.equal(paused.status, "awaiting_approval", JSON.stringify(paused));
  await Promise.all(answers.map((answer) => send(answer, String(paused.approval))));
  return { to, asked, answers };
}

/** The open approval of the call paying `to`, while its form is up (undefined once it is answered). */
async function approvalFor(to: string, client: Client): Promise<string | undefined> {
  for (let tries = 0; tries < 200; tries++) {
    const open = (await openApprovals(client)).find(
      (approval) => (approval.arguments as { to?: string }).to === to,
    );
    if (open !== undefined) return open.approval;
    if (ledgerLines(home.path).some((line) => line.to === to)) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return undefined;
}

/** What every answer of one call must show, given the ledger. */
function check(outcome: { to: string; asked: number; answers: Answer[] }, seedNote: string): void {
  const where = `${outcome.to} (${seedNote}): ${JSON.stringify(outcome.answers)}`;
  const lines = ledgerLines(home.path).filter((line) => line.to === outcome.to);
  assert.ok(lines.length <= 1, `ran ${lines.length} times: ${where}`);
  const paid = lines[0]?.amount;
  let winners = 0;
  for (const answer of outcome.answers) {
    assert.equal(answer.toldError, undefined, `an answer was told an error: ${where}`);
    const told = answer.told ?? {};
    const result = (told.alreadyAnswered === true ? told.result : told) as Record<string, unknown>;
    if (told.alreadyAnswered !== true) {
      winners += 1;
      // The winner's own answer decided: approved runs it with its amount, rejected runs nothing.
      if (answer.approved) assert.equal(paid, answer.amount ?? outcome.asked, `winner's amount: ${where}`);
      else assert.equal(paid, undefined, `a rejected call ran: ${where}`);
    }
    // Everyone is told the one outcome.
    if (paid === undefined) assert.equal(result?.declined, true, `told other than declined: ${where}`);
    else assert.equal(result?.paid, paid, `told another amount: ${where}`);
  }
  // Two answers alike may both be told they decided (the second a replay of the first), never none.
  assert.ok(winners >= 1, `no answer was told it decided: ${where}`);
}

test("answers raced from two processes and the caller's form: one decides, the call runs at most once, all are told", async (t) => {
  const next = seededRandom(seed);
  const stdio = await stdioClient();
  const answerers = [await httpClient(), await httpClient(), stdio];
  const formCaller = await httpClient(formHandler);
  const note = `APPROVAL_RACE_SEED=${seed}`;
  let answered = 0;
  let ran = 0;
  for (let start = 0; start < calls; start += parallel) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(parallel, calls - start) }, (_, offset) =>
        round(start + offset, next, answerers, answerers[(start + offset) % 3] as Client, formCaller),
      ),
    );
    for (const outcome of batch) {
      check(outcome, note);
      answered += outcome.answers.length;
      if (ledgerLines(home.path).some((line) => line.to === outcome.to)) ran += 1;
    }
  }
  assert.deepEqual(await openApprovals(stdio), [], "every answered call closed");
  assert.ok(answered >= calls, `${answered} answers`);
  assert.ok(ran > 0 && ran < calls, `${ran} of ${calls} calls ran: both outcomes are drawn`);
  t.diagnostic(`${calls} calls, ${answered} answers, ${ran} ran; ${note}`);
});
