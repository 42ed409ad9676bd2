/**
 * The redaction property (ADR 0126) through the LangChain integration on real stores: a SQLite file and
 * PostgreSQL, the runner restarted on the same store before some approvals are answered, some approvals
 * answered with edits (a redacted value changed to a new secret, keys added, shown values changed).
 * The oracle is `redaction.property.test.ts`'s: the tool gets the real (edited) values, once; no secret,
 * old or new, nor an unsalted hash of an edit, reaches a frame, an interrupt, the run, a history page or
 * the AG-UI translation; the shown arguments are the oracle's mask of what the tool ran with. At the end
 * the store's own tables are read: `durable_runs` and `durable_frames` hold no secret, and
 * `durable_journal` holds them all, by design (the replay needs them).
 *
 * `TACKLE_PROPERTY_ROUNDS` scales the cases (default a twentieth of 2,000 on each store);
 * `TACKLE_PROPERTY_SEED` replays one.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, it } from "node:test";
import { createRunner, type DurableStore, type Runner } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";
import { type TempStore, tempSqliteStore } from "./helpers.ts";
import { rounds, seeds } from "./property-programs.ts";
import { assertNoMarker, marker } from "./redaction-cases.ts";
import {
  answerOf,
  checkShown,
  forget,
  langChainGraph,
  newCase,
  tally,
  translated,
} from "./redaction-harness.ts";

interface RealStore {
  /** A store on the same data, as a restarted process opens it. */
  open(): Promise<DurableStore>;
  /** Every row of a table, as text. */
  rows(table: string): Promise<string>;
}

/** Drives `count` LangChain cases on `real`, restarting the runner before a third of the answers. */
async function drive(real: RealStore, count: number, offset: number, name: string): Promise<void> {
  const { totals, add } = tally();
  let store = await real.open();
  let runner: Runner = createRunner({ store, graphs: [langChainGraph], pollIntervalMs: 20 });
  try {
    for (const seed of seeds(count, offset)) {
      const c = newCase(seed, true);
      const threadId = `s${seed}`;
      const requests: unknown[] = [];
      let run = await runner.start(langChainGraph, { seed }, { threadId });
      if (c.approve) {
        assert.equal(run.status, "paused", `seed ${seed}`);
        assertNoMarker(run, "the paused run", c);
        requests.push(...run.interrupts.map((open) => open.request));
        if (seed % 3 === 0) {
          await runner.close();
          await store.close();
          store = await real.open();
          runner = createRunner({ store, graphs: [langChainGraph], pollIntervalMs: 20 });
          totals.restarts += 1;
        }
        run = await runner.resume(threadId, { [run.interrupts[0]?.id ?? ""]: answerOf(c) });
      }
      assert.equal(run.status, "completed", `seed ${seed}: ${JSON.stringify(run.error)}`);
      const frames = await runner.frames(threadId);
      assertNoMarker(frames, "the frames", c);
      assertNoMarker(await runner.get(threadId), "the run", c);
      assertNoMarker(await runner.history(threadId), "the history", c);
      assertNoMarker(translated(frames, threadId, run.runId), "the AG-UI events", c);
      checkShown(c, frames, requests);
      add(c);
      forget(seed);
    }
  } finally {
    await runner.close();
    await store.close();
  }
  for (const table of ["durable_runs", "durable_frames"]) {
    const text = await real.rows(table);
    const at = text.indexOf(marker);
    assert.equal(at, -1, `${table} holds a secret near ${text.slice(Math.max(0, at - 120), at + 40)}`);
  }
  assert.ok(totals.secrets === 0 || (await real.rows("durable_journal")).includes(marker));
  console.log(`# ${name}: ${JSON.stringify(totals)}`);
}

describe("redaction as a property, LangChain on real stores", () => {
  let temp: TempStore | undefined;
  let database: TestDatabase | undefined;
  before(async () => {
    temp = tempSqliteStore();
    database = await createTestDatabase("durable_redaction");
  });
  after(async () => {
    await temp?.cleanup();
    await database?.drop();
  });

  it("on a SQLite file: nothing redacted or edited is shown or stored outside the journal; restarts in between", async () => {
    const sqlite = temp as TempStore;
    let first = true;
    const real: RealStore = {
      open: async () => {
        const store = first ? sqlite.store : sqlite.reopen();
        first = false;
        return store;
      },
      rows: async (table) => {
        const db = new DatabaseSync(sqlite.path, { readOnly: true });
        try {
          return JSON.stringify(db.prepare(`SELECT * FROM ${table}`).all());
        } finally {
          db.close();
        }
      },
    };
    await drive(real, rounds(2000) / 20, 400_000, "langchain-sqlite");
  });

  it("on PostgreSQL: the same", async () => {
    const url = (database as TestDatabase).url;
    const real: RealStore = {
      open: () => createPostgresStore({ connectionString: url }),
      rows: async (table) => {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          return JSON.stringify((await client.query(`SELECT * FROM ${table}`)).rows);
        } finally {
          await client.end();
        }
      },
    };
    await drive(real, rounds(2000) / 20, 500_000, "langchain-postgres");
  });
});
