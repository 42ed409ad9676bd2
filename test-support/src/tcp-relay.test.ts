/**
 * The relay's faults on the real PostgreSQL, as the property tests use them: a `COMMIT` whose answer is
 * lost has committed all the same, only the matched connection is reset, and a cut drops every open
 * connection while new ones are taken.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import pg from "pg";
import { createTestDatabase, type TestDatabase } from "./postgres.ts";
import { startTcpRelay, type TcpRelay } from "./tcp-relay.ts";

let database: TestDatabase;
let relay: TcpRelay;
before(async () => {
  database = await createTestDatabase("tackle_relay");
  relay = await startTcpRelay(database.url);
  const setup = new pg.Client({ connectionString: database.url });
  await setup.connect();
  await setup.query("CREATE TABLE t (id int PRIMARY KEY)");
  await setup.end();
});
after(async () => {
  await relay?.close();
  await database?.drop();
});

async function connected(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => {});
  await client.connect();
  return client;
}

it("loses the answer to a matched COMMIT on that connection only; the transaction committed", async () => {
  const [a, b] = [await connected(relay.url), await connected(relay.url)];
  const direct = await connected(database.url);
  try {
    relay.loseAnswerTo(/COMMIT/);
    await b.query("SELECT 1");
    await a.query("BEGIN");
    await a.query("INSERT INTO t VALUES (1)");
    await assert.rejects(a.query("COMMIT"));
    assert.equal(relay.resets, 1);
    const { rows } = await direct.query("SELECT id FROM t");
    assert.deepEqual(rows, [{ id: 1 }]);
    // The other connection never matched and still answers; the loss was armed once.
    assert.deepEqual((await b.query("SELECT 2 AS n")).rows, [{ n: 2 }]);
    await b.query("BEGIN");
    await b.query("COMMIT");
    assert.equal(relay.resets, 1);
  } finally {
    await Promise.all([a.end().catch(() => {}), b.end().catch(() => {}), direct.end()]);
  }
});

it("a cut drops every open connection and takes new ones at once", async () => {
  const [a, b] = [await connected(relay.url), await connected(relay.url)];
  assert.equal(relay.connections, 2);
  relay.cut();
  await assert.rejects(a.query("SELECT 1"));
  await assert.rejects(b.query("SELECT 1"));
  const c = await connected(relay.url);
  try {
    assert.deepEqual((await c.query("SELECT 3 AS n")).rows, [{ n: 3 }]);
    assert.equal(relay.connections, 1);
  } finally {
    await c.end();
  }
});

it("a stall holds every byte either way without closing, new connections hang, and unstall delivers in order", async () => {
  const a = await connected(relay.url);
  const resets = relay.resets;
  try {
    relay.stall();
    assert.equal(relay.stalled, true);
    let answered = false;
    const pending = a.query("SELECT 4 AS n").then((result) => {
      answered = true;
      return result;
    });
    // A connect in the stall is accepted but hears nothing: it times out rather than being refused.
    const late = new pg.Client({ connectionString: relay.url, connectionTimeoutMillis: 300 });
    late.on("error", () => {});
    await assert.rejects(late.connect(), /timeout/);
    assert.equal(answered, false);
    assert.equal(relay.resets, resets, "a stall resets nothing");
    relay.unstall();
    assert.deepEqual((await pending).rows, [{ n: 4 }]);
    assert.deepEqual((await a.query("SELECT 5 AS n")).rows, [{ n: 5 }]);
  } finally {
    relay.unstall();
    await a.end().catch(() => {});
  }
});

it("a connection closed during a stall closes on the far side only once the stall ends", async () => {
  const direct = await connected(database.url);
  const a = await connected(`${relay.url}?application_name=relay_stall_close`);
  const sessions = async () =>
    Number(
      (
        await direct.query(
          "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'relay_stall_close'",
        )
      ).rows[0].n,
    );
  try {
    relay.stall();
    (a as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(await sessions(), 1, "the server still sees the session: the close is held");
    relay.unstall();
    for (let tries = 0; tries < 200 && (await sessions()) > 0; tries++)
      await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(await sessions(), 0);
  } finally {
    relay.unstall();
    await direct.end();
  }
});
