/**
 * The conformance suite every store passes: each behaviour the service promises, run through the
 * service on the store under test. Each test works in its own fresh tenant. The cases live by
 * aggregate, as the stores do, under `conformance/`.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { createMemoryService, type MemoryService, type MemoryStore } from "@tackle/memory";
import type { ConformanceCases, ConformanceContext } from "./conformance/cases.ts";
import { eventsCases } from "./conformance/events.ts";
import { idempotencyCases } from "./conformance/idempotency.ts";
import { importsCases } from "./conformance/imports.ts";
import { jobsAndStatisticsCases } from "./conformance/jobs-and-statistics.ts";
import { knowledgeAndBlocksCases } from "./conformance/knowledge-and-blocks.ts";
import { memoriesCases } from "./conformance/memories.ts";
import { searchCases } from "./conformance/search.ts";

export interface ConformanceTarget {
  /** Opens the store; called again after `close` to prove data survives a reopen. */
  open(): Promise<MemoryStore>;
  /** Removes whatever the suite created (a database, a file). */
  destroy(): Promise<void>;
}

const groups: readonly ConformanceCases[] = [
  memoriesCases,
  eventsCases,
  searchCases,
  knowledgeAndBlocksCases,
  importsCases,
  jobsAndStatisticsCases,
  idempotencyCases,
];

export function storeConformance(label: string, target: ConformanceTarget): void {
  describe(`store conformance: ${label}`, () => {
    let store: MemoryStore;
    let service: MemoryService;
    const context = (opened: MemoryService[]): ConformanceContext => ({
      store,
      service,
      tenant: () => `tenant-${randomUUID()}`,
      serviceOver: (options = {}) => {
        // Closing it closes its job runner and leaves the store the other cases share open.
        const borrowed: MemoryStore = { ...(options.store ?? store), close: async () => {} };
        const opening = createMemoryService({ ...options, store: borrowed });
        opened.push(opening);
        return opening;
      },
    });

    before(async () => {
      store = await target.open();
      service = createMemoryService({ store });
    });
    after(async () => {
      await service.close();
      await target.destroy();
    });

    for (const cases of groups) {
      for (const [name, body] of Object.entries(cases)) {
        it(name, async () => {
          const opened: MemoryService[] = [];
          try {
            await body(context(opened));
          } finally {
            await Promise.all(opened.map((other) => other.close()));
          }
        });
      }
    }

    // Last: it closes the store and opens it again, which the cases above share.
    it("data survives closing and reopening the store", async () => {
      const t = `tenant-${randomUUID()}`;
      const { memory } = await service.add(t, { userId: "u", content: "Persisted across reopen" });
      await service.writeEvent(t, {
        sessionId: "s",
        role: "user",
        content: "persisted event",
        customId: "p-1",
        infer: false,
      });
      await service.close();
      store = await target.open();
      service = createMemoryService({ store });
      assert.equal((await service.getMemory(t, memory.id)).memory.content, "Persisted across reopen");
      const again = await service.writeEvent(t, {
        sessionId: "s",
        role: "user",
        content: "persisted event",
        customId: "p-1",
      });
      assert.equal(again.created, false);
    });
  });
}
