/** Store conformance. Import jobs: transcripts stored once, reruns that never bring back what the user changed. */
import assert from "node:assert/strict";
import { type ConformanceCases, waitForJob } from "./cases.ts";

export const importsCases: ConformanceCases = {
  "an imported turn longer than an event holds is stored cut, and the job's result counts it": async ({
    service,
    tenant,
  }) => {
    const t = tenant();
    const long = `${"The itinerary, day by day. ".repeat(1_500)}END`;
    const job = await waitForJob(
      service,
      t,
      (
        await service.importConversations(t, {
          userId: "u",
          format: "openai",
          infer: false,
          conversations: [
            {
              id: "long",
              messages: [
                { role: "user", content: "Plan my trip." },
                { role: "assistant", name: "A".repeat(100), content: long },
              ],
            },
          ],
        })
      ).job.id,
    );
    assert.ok(long.length > 32_000);
    assert.deepEqual((job.result as { events: unknown }).events, {
      created: 2,
      existing: 0,
      skipped: 0,
      truncated: 1,
    });
    const { events } = await service.recallConversation(t, { userId: "u", sessionId: "import:long" });
    const stored = events.find((event) => event.role === "assistant");
    assert.equal(stored?.content.length, 32_000);
    assert.ok(long.startsWith(stored!.content));
  },
  "import jobs store OpenAI and Anthropic transcripts once, with provenance to the job": async ({
    service,
    tenant,
  }) => {
    const t = tenant();
    const request = {
      userId: "u",
      format: "anthropic" as const,
      conversations: [
        {
          id: "conv-1",
          system: "You are a travel agent.",
          messages: [
            { role: "user", content: [{ type: "text", text: "I always travel with my dog Rex." }] },
            { role: "assistant", content: "Noted!" },
          ],
        },
      ],
    };
    const { job } = await service.importConversations(t, request);
    const done = await waitForJob(service, t, job.id);
    assert.equal(done.status, "succeeded");
    assert.deepEqual((done.result as { events: unknown }).events, {
      created: 3,
      existing: 0,
      skipped: 0,
      truncated: 0,
    });
    const again = await waitForJob(service, t, (await service.importConversations(t, request)).job.id);
    assert.deepEqual((again.result as { events: unknown }).events, {
      created: 0,
      existing: 3,
      skipped: 0,
      truncated: 0,
    });
    const openai = await waitForJob(
      service,
      t,
      (
        await service.importConversations(t, {
          userId: "u",
          format: "openai",
          conversations: [
            {
              messages: [
                { role: "system", content: "be brief" },
                { role: "user", content: "My passport expires in March." },
                { role: "assistant", content: null, tool_calls: [] },
              ],
            },
          ],
        })
      ).job.id,
    );
    assert.deepEqual((openai.result as { events: unknown }).events, {
      created: 2,
      existing: 0,
      skipped: 1,
      truncated: 0,
    });
    const found = await service.search(t, { userId: "u", query: "dog Rex" });
    const memory = found.results[0]?.memory;
    assert.equal(memory?.provenance.importJobId, job.id);
    const chain = await service.chainTrace(t, memory!.id);
    assert.equal(chain.importJob?.id, job.id);
    assert.equal(chain.events[0]?.content, "I always travel with my dog Rex.");
    const listed = await service.listJobs(t, { type: "import" });
    assert.equal(listed.jobs.length, 3);
  },
  "an import run again never brings back a memory the user deleted or edited; a new turn is added": async ({
    serviceOver,
    store,
    service,
    tenant,
  }) => {
    const t = tenant();
    const turns = [
      { role: "user", content: "I always travel with my dog Rex." },
      { role: "assistant", content: "Noted!" },
      { role: "user", content: "My passport expires in March." },
    ];
    const request = {
      userId: "u",
      format: "openai" as const,
      conversations: [{ id: "trip", messages: turns }],
    };
    const all = async () =>
      (
        await store.listMemories(
          t,
          { userId: "u" },
          { limit: 100, order: "recent", statuses: ["active", "superseded", "archived", "deleted"] },
        )
      )
        .filter((memory) => memory.kind !== "episode")
        .map((memory) => `${memory.status}: ${memory.content}`)
        .sort();
    // Each turn is also kept once as an episode (ADR 0361), whatever the reruns.
    const episodes = async () =>
      (
        await store.listMemories(
          t,
          { userId: "u" },
          { limit: 100, order: "recent", statuses: ["active", "deleted"] },
        )
      )
        .filter((memory) => memory.kind === "episode")
        .map((memory) => `${memory.status}: ${memory.content}`)
        .sort();
    const { job } = await service.importConversations(t, request);
    assert.equal((await waitForJob(service, t, job.id)).status, "succeeded");
    const made = (await store.listMemories(t, { userId: "u" }, { limit: 10, order: "recent" })).filter(
      (memory) => memory.kind !== "episode",
    );
    const rex = made.find((memory) => memory.content.includes("Rex"));
    const passport = made.find((memory) => memory.content.includes("passport"));
    assert.ok(rex && passport, JSON.stringify(made.map((memory) => memory.content)));
    // The user forgets one and corrects the other.
    await service.deleteMemory(t, rex.id, { reason: "the user asked to forget it" });
    await service.updateMemory(t, passport.id, { content: "My passport expires in April." });

    // The same job runs again, as it does when its process died before recording its end.
    const stored = await store.getJob(t, job.id);
    assert.ok(stored);
    const { result: _result, finishedAt: _finished, ...unfinished } = stored;
    await store.updateJob({
      ...unfinished,
      // A finished job keeps no input (ADR 0551); one whose process died still had it.
      input: job.input,
      status: "running",
      startedAt: new Date(Date.now() - 60_000).toISOString(),
    });
    const restarted = serviceOver();
    const rerun = await waitForJob(restarted, t, job.id);
    assert.equal(rerun.status, "succeeded");
    assert.deepEqual((rerun.result as { events: unknown }).events, {
      created: 0,
      existing: 3,
      skipped: 0,
      truncated: 0,
    });
    const expected = ["active: My passport expires in April.", "deleted: I always travel with my dog Rex."];
    assert.deepEqual(await all(), expected);

    // The same transcript imported again, then once more with a new turn: only the new turn adds.
    const again = await waitForJob(service, t, (await service.importConversations(t, request)).job.id);
    assert.deepEqual((again.result as { events: unknown }).events, {
      created: 0,
      existing: 3,
      skipped: 0,
      truncated: 0,
    });
    assert.deepEqual(await all(), expected);
    const longer = await waitForJob(
      service,
      t,
      (
        await service.importConversations(t, {
          ...request,
          conversations: [
            {
              id: "trip",
              messages: [...turns, { role: "user", content: "My favourite colour is green." }],
            },
          ],
        })
      ).job.id,
    );
    assert.deepEqual((longer.result as { events: unknown }).events, {
      created: 1,
      existing: 3,
      skipped: 0,
      truncated: 0,
    });
    assert.deepEqual(await all(), ["active: My favourite colour is green.", ...expected]);
    assert.deepEqual(
      await episodes(),
      [
        "active: My favourite colour is green.",
        "active: My passport expires in March.",
        "active: Noted!",
        // Forgetting the fact forgot the turn that said it word for word.
        "deleted: I always travel with my dog Rex.",
      ],
      "the turns kept once each, the forgotten one still forgotten",
    );
    assert.equal((await service.search(t, { userId: "u", query: "dog Rex" })).results.length, 0);
  },
  "an import whose turn matched a memory of another source never brings that fact back when run again, after the user deleted or edited that memory":
    async ({ serviceOver, store, service, tenant }) => {
      const t = tenant();
      const scope = { userId: "u", sessionId: "trip" };
      const active = async () =>
        (await store.listMemories(t, scope, { limit: 100, order: "recent", statuses: ["active"] }))
          .filter((memory) => memory.kind !== "episode")
          .map((memory) => memory.content)
          .sort();
      // The user said both facts elsewhere first (an API add, a live conversation turn).
      const rex = await service.add(t, { ...scope, content: "I always travel with my dog Rex." });
      const passport = await service.add(t, { ...scope, content: "My passport expires in March." });
      const request = {
        ...scope,
        format: "openai" as const,
        conversations: [
          {
            id: "trip",
            messages: [
              { role: "user", content: "I always travel with my dog Rex." },
              { role: "user", content: "My passport expires in March." },
            ],
          },
        ],
      };
      const { job } = await service.importConversations(t, request);
      const done = await waitForJob(service, t, job.id);
      assert.equal((done.result as { memories: number }).memories, 0, "both facts were already held");
      assert.deepEqual(await active(), ["I always travel with my dog Rex.", "My passport expires in March."]);
      // The user forgets one and corrects the other.
      await service.deleteMemory(t, rex.memory.id, { reason: "the user asked to forget it" });
      await service.updateMemory(t, passport.memory.id, { content: "My passport expires in April." });
      // The same job runs again, as it does when its process died before recording its end.
      const stored = await store.getJob(t, job.id);
      assert.ok(stored);
      const { result: _result, finishedAt: _finished, ...unfinished } = stored;
      await store.updateJob({
        ...unfinished,
        // A finished job keeps no input (ADR 0551); one whose process died still had it.
        input: job.input,
        status: "running",
        startedAt: new Date(Date.now() - 60_000).toISOString(),
      });
      const restarted = serviceOver();
      const rerun = await waitForJob(restarted, t, job.id);
      assert.equal(rerun.status, "succeeded");
      assert.deepEqual(
        await active(),
        ["My passport expires in April."],
        "deleted stays deleted, the edit stays",
      );
      assert.equal((await service.search(t, { ...scope, query: "dog Rex" })).results.length, 0);
    },
};
