/** The document server's behaviour, run once per store (SQLite, PostgreSQL). */
import { after, before, describe } from "node:test";
import { type StoreFactory, suiteServer } from "./document-server-harness.ts";
import { rowsTests } from "./document-server-rows.ts";
import { servingTests } from "./document-server-serving.ts";
import { syncTests } from "./document-server-sync.ts";

export type { StoreFactory } from "./document-server-harness.ts";

export function documentServerSuite(factory: StoreFactory): void {
  describe(`document server on ${factory.name}`, () => {
    const suite = suiteServer(factory);
    before(async () => suite.start());
    after(async () => {
      await suite.server.close();
      await factory.cleanup();
    });
    syncTests(suite);
    servingTests(suite);
    rowsTests(suite);
  });
}
