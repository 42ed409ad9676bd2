/**
 * Redaction as a property (ADR 0126): no value at a redacted path reaches what a UI or an approver reads, and the
 * tool still gets the real values. Thousands of random cases drive one tool call through the AI SDK
 * integration (`withDurableTools` + `durableModel`, the AI SDK's MockLanguageModelV4 emitting the call):
 * a random input (nested objects and arrays, keys `constructor`, `toString`, `length`, keys holding dots
 * or `*`, scalars at a redacted path, paths to nowhere, wildcards), random `redact` paths, with and
 * without `approve`, the tool succeeding, failing (a harmless message) or refused (approval declined).
 * Every value at a redacted path carries a unique secret marker. The oracle:
 *
 * - (a) the tool's handler receives exactly the real input, once, or never when refused; an approval
 *   answered with edits (about one case in five: a redacted value changed to a new secret, keys added,
 *   a shown value changed) hands it the edited real values;
 * - (b) no marker appears in anything a UI or an approver reads: every frame, the interrupts'
 *   requests, the run, its history, the AG-UI translation; over HTTP also the `GET /runs/:id`,
 *   `/history` answers and the frames and AG-UI SSE streams; nor, for an edit, an unsalted hash of the
 *   edited arguments or of a secret in them (an interrupt id's fingerprint would be one);
 * - (c) the shown arguments (tool cards, the approval's `params`) and the shown result (the tool
 *   returns its input) are the oracle's mask, written apart from `redact`: a value at a path masked
 *   whole as `"[redacted]"`, whatever its type, nothing else changed, a missing path left missing;
 *   after an edit, the cards show the edited arguments masked the same way (a shown edit as edited);
 * - (d) an approval answered after a runner restart on the SQLite file hands the tool the real values;
 * - (e) over HTTP, a process that dies inside an approved tool's call leaves no secret in the run or its
 *   frames, and the runner that takes the run over hands the tool the real (edited) values again, its
 *   cards, run, history and streams showing none;
 * - (f) over HTTP, an edited answer sent as an AG-UI resume whose messages restate the call with the real
 *   edited arguments and a result holding the real input shows neither, in its stream or later (ADR
 *   0128); at the end `durable_runs` and `durable_frames` of the file hold no secret.
 *
 * By design, one stored table DOES hold the real values: `durable_journal` (the model step's answer with
 * the tool call's arguments, the tool step's result, an approver's edited arguments) must, to resume a
 * run without asking the model again. `durable_frames` and `durable_runs` (its interrupts' requests, its
 * state) hold only what was shown — as long as the graph keeps no redacted value in its own state
 * (`redaction-stores.property.test.ts` reads those tables, the LangChain cases on a SQLite file and on
 * PostgreSQL). `__proto__` keys go through the LangChain integration and `redact` itself: the AI SDK's JSON parser refuses a tool call that carries one. The approval's fingerprint is of
 * the arguments as shown (ADR 0126), so it tells nothing of a redacted value either.
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the number of cases (default 2,000: that many LangChain cases and
 * `redact` cases in memory, half as many AI SDK ones, a tenth over HTTP on a SQLite file);
 * `TACKLE_PROPERTY_SEED` replays one.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, it } from "node:test";
import { createMemoryStore, createRunner, redact } from "@tackle/durable";
import { seededRandom } from "@tackle/test-support";
import { rounds, seeds } from "./property-programs.ts";
import { assertNoMarker, expectedMask, marker, randomCase } from "./redaction-cases.ts";
import {
  answerOf,
  checkShown,
  forget,
  graph,
  langChainGraph,
  newCase,
  tally,
  translated,
} from "./redaction-harness.ts";
import { createHttpRig } from "./redaction-http.ts";

describe("redaction as a property", () => {
  const inMemory = async (chosen: typeof graph, count: number, offset: number, withProto: boolean) => {
    const { totals, add } = tally();
    const runner = createRunner({ store: createMemoryStore(), graphs: [chosen] });
    try {
      for (const seed of seeds(count, offset)) {
        const c = newCase(seed, withProto);
        const threadId = `m${seed}`;
        const requests: unknown[] = [];
        let run = await runner.start(chosen, { seed }, { threadId });
        if (c.approve) {
          assert.equal(run.status, "paused", `seed ${seed}`);
          assertNoMarker(run, "the paused run", c);
          requests.push(...run.interrupts.map((open) => open.request));
          run = await runner.resume(threadId, { [run.interrupts[0]?.id ?? ""]: answerOf(c) });
        }
        assert.equal(run.status, "completed", `seed ${seed}: ${JSON.stringify(run.error)}`);
        const frames = await runner.frames(threadId);
        assertNoMarker(frames, "the frames", c);
        assertNoMarker(run, "the run", c);
        assertNoMarker(await runner.history(threadId), "the history", c);
        assertNoMarker(translated(frames, threadId, run.runId), "the AG-UI events", c);
        checkShown(c, frames, requests);
        add(c);
        forget(seed);
      }
      console.log(`# ${chosen.name}: ${JSON.stringify(totals)}`);
    } finally {
      await runner.close();
    }
  };

  it("no redacted value reaches a frame, an approver, the run or AG-UI; the tool gets the real input (AI SDK, in-memory store)", () =>
    inMemory(graph, rounds(2000) / 2, 1, false));

  it("the same through the LangChain integration, `__proto__` keys included", () =>
    inMemory(langChainGraph, rounds(2000), 300_000, true));

  it("`__proto__`, inherited names and dotted keys mask as the oracle says, on `redact` itself", () => {
    for (const seed of seeds(rounds(2000), 100_000)) {
      const c = randomCase(seededRandom(seed), seed, true);
      const shown = redact(c.input, c.paths);
      assertNoMarker(shown, "redact", c);
      assert.deepStrictEqual(shown, expectedMask(c.input, c.paths), `seed ${seed}: ${JSON.stringify(c)}`);
      if (c.edit !== undefined) {
        assert.deepStrictEqual(redact(c.edit, c.paths), expectedMask(c.edit, c.paths), `seed ${seed}: edit`);
      }
    }
  });
});

describe("redaction as a property, over HTTP on a SQLite file", () => {
  const rig = createHttpRig();
  const { getJson, post, settled, sse, agUiResume, answerAndDie } = rig;
  before(() => rig.start());
  after(() => rig.stop());

  it("no redacted value reaches the run, history, frames or AG-UI answers; a resume after a restart, or a takeover of a call in flight, hands the tool the real input", async () => {
    const { totals, add } = tally();
    for (const seed of seeds(rounds(2000) / 10, 200_000)) {
      const c = newCase(seed);
      const threadId = `h${seed}`;
      await post("/runs", { graph: "redaction", threadId, input: { seed } });
      let run = await settled(threadId);
      const requests: unknown[] = [];
      const died = c.approve && c.outcome !== "refused" && seed % 3 === 1;
      if (c.approve) {
        assert.equal(run.status, "paused", `seed ${seed}`);
        assertNoMarker(run, "GET /runs/:id (paused)", c);
        requests.push(...run.interrupts.map((item) => item.request));
        if (seed % 3 === 0) {
          // (d) the runner restarts on the same file before the approval is answered.
          await rig.restart();
          totals.restarts += 1;
        }
        const answers = { [run.interrupts[0]?.id ?? ""]: answerOf(c) };
        if (died) {
          await answerAndDie(c, threadId, answers);
          totals.takeovers += 1;
        } else if (c.edit !== undefined && seed % 2 === 0) {
          await agUiResume(c, threadId, run.interrupts[0] as (typeof run.interrupts)[number]);
          totals.agUiResumes += 1;
        } else await post(`/runs/${threadId}/resume`, { answers });
        run = await settled(threadId);
      }
      assert.equal(run.status, "completed", `seed ${seed}: ${JSON.stringify(run)}`);
      assertNoMarker(await getJson(`/runs/${threadId}`), "GET /runs/:id", c);
      assertNoMarker(await getJson(`/runs/${threadId}/history`), "GET /runs/:id/history", c);
      const frames = await rig.runner.frames(threadId);
      const last = frames.at(-1)?.seq;
      assertNoMarker(
        await sse(`/runs/${threadId}/frames`, (text) => text.includes(`id: ${last}\n`)),
        "the frames stream",
        c,
      );
      const ends = translated(frames, threadId, run.runId).filter(
        (event) => (event as { type: string }).type === "RUN_FINISHED",
      ).length;
      const agUi = await sse(
        `/runs/${threadId}/frames?format=ag-ui`,
        (text) => text.split('"type":"RUN_FINISHED"').length - 1 >= ends,
      );
      assertNoMarker(agUi, "the AG-UI stream", c);
      checkShown(c, frames, requests, died);
      add(c);
      forget(seed);
    }
    for (const table of ["durable_runs", "durable_frames"]) {
      const db = new DatabaseSync(rig.temp.path, { readOnly: true });
      try {
        const text = JSON.stringify(db.prepare(`SELECT * FROM ${table}`).all());
        const at = text.indexOf(marker);
        assert.equal(at, -1, `${table} holds a secret near ${text.slice(Math.max(0, at - 120), at + 40)}`);
      } finally {
        db.close();
      }
    }
    console.log(`# http: ${JSON.stringify(totals)}`);
  });
});
