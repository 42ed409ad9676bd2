/** Store conformance. Writes under idempotency keys: once, together with their answer, bounded. */
import assert from "node:assert/strict";
import { MemoryError } from "@tackle/memory";
import { type ConformanceCases, rejectsWithCode, waitForJob } from "./cases.ts";

export const idempotencyCases: ConformanceCases = {
  "a write under an idempotency key runs once: concurrent repeats answer its answer, another request is refused, another tenant's key is its own":
    async ({ service, tenant }) => {
      const [t, other] = [tenant(), tenant()];
      let runs = 0;
      const write = (tenantId: string, content: string) => async () => {
        runs += 1;
        await new Promise((resolve) => setTimeout(resolve, 60));
        return service.add(tenantId, { userId: "ada", kind: "episode", content });
      };
      const request = { content: "Ada: Haha, totally." };
      const answers = await Promise.all(
        Array.from({ length: 6 }, () =>
          service.writeOnce(t, { key: "turn-1", request }, write(t, request.content)),
        ),
      );
      assert.equal(runs, 1, "one of six concurrent requests ran the write");
      assert.equal(new Set(answers.map(({ answer }) => answer.memory.id)).size, 1);
      assert.deepEqual(answers.map(({ replayed }) => replayed).sort(), [false, true, true, true, true, true]);
      assert.equal((await service.status(t)).counts.memories, 1);
      // The same key with another request: refused, and the write is not run.
      await rejectsWithCode(
        service.writeOnce(t, { key: "turn-1", request: { content: "other" } }, write(t, "other")),
        "idempotency_key_reused",
        422,
      );
      assert.equal(runs, 1);
      // Another tenant's key of the same name is its own: its write runs and answers its own memory.
      const theirs = await service.writeOnce(
        other,
        { key: "turn-1", request },
        write(other, request.content),
      );
      assert.equal(theirs.replayed, false);
      assert.equal(runs, 2);
      assert.notEqual(theirs.answer.memory.id, answers[0]?.answer.memory.id);
      // A write that failed frees its key: the retry runs it.
      await assert.rejects(
        service.writeOnce(t, { key: "turn-2", request }, async () => {
          throw new MemoryError("unavailable", "store busy", 503);
        }),
      );
      const retried = await service.writeOnce(t, { key: "turn-2", request }, write(t, "retried"));
      assert.equal(retried.replayed, false);
    },
  "idempotency keys: a repeat past the wait gets a retryable in_use conflict; keys expire, are replaced and swept":
    async ({ serviceOver, store, tenant }) => {
      let now = Date.now();
      const timed = serviceOver({
        now: () => new Date(now),
        resumeJobs: false,
        idempotency: { ttlMs: 1000, waitMs: 50 },
      });
      const t = tenant();
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let entered: () => void = () => {};
      const running = new Promise<void>((resolve) => {
        entered = resolve;
      });
      const first = timed.writeOnce(t, { key: "slow", request: 1 }, async () => {
        entered();
        await gate;
        return "first";
      });
      // The repeat comes while the first write runs (it holds the key), however slow the store's
      // lookup before it was on a loaded machine.
      await running;
      await assert.rejects(
        timed.writeOnce(t, { key: "slow", request: 1 }, async () => "second"),
        (error: unknown) =>
          MemoryError.isInstance(error) &&
          error.code === "idempotency_key_in_use" &&
          error.status === 409 &&
          error.retryable,
      );
      release();
      assert.deepEqual(await first, { answer: "first", replayed: false });
      assert.deepEqual(await timed.writeOnce(t, { key: "slow", request: 1 }, async () => "third"), {
        answer: "first",
        replayed: true,
      });
      // Past its expiry the key is free again, for any request.
      now += 1500;
      assert.deepEqual(await timed.writeOnce(t, { key: "slow", request: 2 }, async () => "fourth"), {
        answer: "fourth",
        replayed: false,
      });
      // Only that record has expired a second later (the suite's others live 24 h).
      assert.equal(await store.sweepIdempotencyKeys(new Date(now + 1000).toISOString()), 1);
      assert.deepEqual(await timed.writeOnce(t, { key: "slow", request: 3 }, async () => "fifth"), {
        answer: "fifth",
        replayed: false,
      });
      await rejectsWithCode(
        timed.writeOnce(t, { key: "", request: 1 }, async () => 0),
        "invalid_input",
        400,
      );
    },
  "a keyed write and its key's answer commit together: a write that throws after writing leaves nothing, and two services racing on one key store once":
    async ({ serviceOver, service, tenant }) => {
      const t = tenant();
      const request = { content: "Ada: I booked the window seat." };
      const add = (content: string) => () =>
        service.add(t, { userId: "ada", kind: "episode", content }).then(async (answer) => {
          await new Promise((resolve) => setTimeout(resolve, 40));
          return answer;
        });
      // The memory was inserted, then the write failed before answering: both are rolled back.
      await assert.rejects(
        service.writeOnce(t, { key: "seat", request }, async () => {
          await add(request.content)();
          throw new MemoryError("unavailable", "lost the model", 503);
        }),
        /lost the model/,
      );
      assert.equal((await service.status(t)).counts.memories, 0, "the failed write stored nothing");
      // Two services on one store (two processes on one database) race under one key: each runs
      // the write, the second to record the key rolls its write back and answers the first's answer.
      const other = serviceOver({ resumeJobs: false });
      const answers = await Promise.all([
        service.writeOnce(t, { key: "seat", request }, add(request.content)),
        other.writeOnce(t, { key: "seat", request }, add(request.content)),
      ]);
      assert.deepEqual(answers.map(({ replayed }) => replayed).sort(), [false, true]);
      assert.equal(answers[0]?.answer.memory.id, answers[1]?.answer.memory.id);
      assert.equal((await service.status(t)).counts.memories, 1, "stored once");
      // A job queued inside a keyed write runs once the write commits.
      const submitted = await service.writeOnce(t, { key: "import", request: "import" }, () =>
        service.importConversations(t, {
          userId: "ada",
          format: "openai",
          conversations: [{ messages: [{ role: "user", content: "I am allergic to peanuts." }] }],
        }),
      );
      const job = await waitForJob(service, t, submitted.answer.job.id);
      assert.equal(job.status, "succeeded");
      assert.equal((await service.status(t)).counts.events, 1, "the job ran once, after the commit");
    },
  "an answer over the kept size is answered once; a repeat is told the write was done (idempotency_answer_not_kept)":
    async ({ serviceOver, tenant }) => {
      const capped = serviceOver({ resumeJobs: false, idempotency: { maxAnswerBytes: 2048 } });
      const t = tenant();
      const small = { userId: "ada", content: "Ada prefers tea." };
      const first = await capped.writeOnce(t, { key: "small", request: small }, () => capped.add(t, small));
      const repeat = await capped.writeOnce(t, { key: "small", request: small }, () => capped.add(t, small));
      assert.deepEqual(repeat, { answer: first.answer, replayed: true }, "a small answer is kept whole");
      const large = { userId: "ada", content: `Ada's long note:${" words of the note".repeat(200)}` };
      const whole = await capped.writeOnce(t, { key: "large", request: large }, () => capped.add(t, large));
      assert.equal(whole.answer.memory.content, large.content, "the first answer is whole");
      await assert.rejects(
        capped.writeOnce(t, { key: "large", request: large }, () => capped.add(t, large)),
        (error: unknown) =>
          MemoryError.isInstance(error) &&
          error.code === "idempotency_answer_not_kept" &&
          error.status === 409 &&
          !error.retryable &&
          (error.data as { bytes: number }).bytes > 2048,
      );
      assert.equal((await capped.status(t)).counts.memories, 2, "the repeat wrote nothing");
    },
};
