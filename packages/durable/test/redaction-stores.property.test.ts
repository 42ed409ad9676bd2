/**
 * The redaction property (ADR 0126) through the LangChain integration on real stores: a SQLite file and
 * PostgreSQL, the runner restarted on the same store before some approvals are answered, the runner
 * dying inside some approved tools' calls (a new runner on the same store takes the run over and runs
 * the call again; what the dead one left is read while the call hangs), some approvals answered with
 * edits (a redacted value changed to a new secret, keys added, shown values changed).
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
import {
  type Answers,
  createRunner,
  type DurableStore,
  type Runner,
  type RunSnapshot,
} from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";
import { type TempStore, tempSqliteStore } from "./helpers.ts";
import { rounds, seeds } from "./property-programs.ts";
import { assertNoMarker, marker, type RedactionCase } from "./redaction-cases.ts";
import {
  answerOf,
  checkShown,
  dieInTool,
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

type CaseState = { seed: number; reply?: string };

/** Throws if `durable_runs` or `durable_frames` holds a secret. */
async function noStoredSecret(real: RealStore, when: string): Promise<void> {
  for (const table of ["durable_runs", "durable_frames"]) {
    const text = await real.rows(table);
    const at = text.indexOf(marker);
    assert.equal(
      at,
      -1,
      `${table} ${when} holds a secret near ${text.slice(Math.max(0, at - 120), at + 40)}`,
    );
  }
}

/** The runner of the cases, restarted on a store of the same data as another process would open it. */
class Driver {
  runner!: Runner;
  private store!: DurableStore;
  private readonly real: RealStore;
  constructor(real: RealStore) {
    this.real = real;
  }

  async open(leaseMs?: number): Promise<void> {
    this.store = await this.real.open();
    this.runner = createRunner({
      store: this.store,
      graphs: [langChainGraph],
      pollIntervalMs: 20,
      ...(leaseMs === undefined ? {} : { leaseMs }),
    });
  }

  /** A clean restart: the runner closes, a new one opens. */
  async restart(): Promise<void> {
    await this.runner.close();
    await this.store.close();
    await this.open();
  }

  /**
   * The answer given, and the driver dies in the approved tool's call: what it left shows no secret,
   * and a new runner on the same data takes the run over (leaseMs 0: the old driver is known dead).
   */
  async answerAndDie(c: RedactionCase, threadId: string, answers: Answers): Promise<RunSnapshot<CaseState>> {
    const hung = dieInTool(c.seed);
    const launched = await this.runner.launchResume(threadId, answers);
    launched.finished.catch(() => {});
    await hung;
    assertNoMarker(await this.runner.get(threadId), "the run with its tool in flight", c);
    assertNoMarker(await this.runner.frames(threadId), "the frames with the tool in flight", c);
    await noStoredSecret(this.real, "with a tool in flight");
    const dead = { runner: this.runner, store: this.store };
    // Its process is gone: no more sweeps or expiry loads (its close waits for the hung call forever).
    dead.runner.close().catch(() => {});
    await this.open(0);
    const run = await this.runner.resume<CaseState>(threadId);
    // And so are its connections; a write it still tries fails, fenced or closed.
    await dead.store.close();
    return run;
  }

  async close(): Promise<void> {
    await this.runner.close();
    await this.store.close();
  }
}

/**
 * Drives `count` LangChain cases on `real`: the runner restarted before a third of the answers, and
 * killed inside the approved tool's call after another third (the next runner takes the run over).
 */
async function drive(real: RealStore, count: number, offset: number, name: string): Promise<void> {
  const { totals, add } = tally();
  const driver = new Driver(real);
  await driver.open();
  try {
    for (const seed of seeds(count, offset)) {
      const c = newCase(seed, true);
      const threadId = `s${seed}`;
      const requests: unknown[] = [];
      let run = await driver.runner.start(langChainGraph, { seed }, { threadId });
      const died = c.approve && c.outcome !== "refused" && seed % 3 === 1;
      if (c.approve) {
        assert.equal(run.status, "paused", `seed ${seed}`);
        assertNoMarker(run, "the paused run", c);
        requests.push(...run.interrupts.map((open) => open.request));
        if (seed % 3 === 0) {
          await driver.restart();
          totals.restarts += 1;
        }
        const answers = { [run.interrupts[0]?.id ?? ""]: answerOf(c) };
        if (died) totals.takeovers += 1;
        run = died
          ? await driver.answerAndDie(c, threadId, answers)
          : await driver.runner.resume(threadId, answers);
      }
      assert.equal(run.status, "completed", `seed ${seed}: ${JSON.stringify(run.error)}`);
      const frames = await driver.runner.frames(threadId);
      assertNoMarker(frames, "the frames", c);
      assertNoMarker(await driver.runner.get(threadId), "the run", c);
      assertNoMarker(await driver.runner.history(threadId), "the history", c);
      assertNoMarker(translated(frames, threadId, run.runId), "the AG-UI events", c);
      checkShown(c, frames, requests, died);
      add(c);
      forget(seed);
    }
  } finally {
    await driver.close();
  }
  await noStoredSecret(real, "at the end");
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
