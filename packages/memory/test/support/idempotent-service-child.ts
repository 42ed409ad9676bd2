/**
 * A memory service process for idempotent-writes.property.test.ts. Usage: idempotent-service-child.ts
 * <SQLite file or PostgreSQL url>. Its embedder takes 400 ms for a text with "slow" in it, so a write
 * of one is still running when a resend arrives. Prints "ready <url>" once it listens; SIGTERM closes it.
 */
import type { EmbeddingModelV4 } from "@ai-sdk/provider";
import { serveMemory } from "@tackle/memory/server";
import { createHashingTestEmbedder } from "@tackle/memory/test";

const inner = createHashingTestEmbedder();
const embeddingModel: EmbeddingModelV4 = {
  ...inner,
  async doEmbed(options) {
    if (options.values.some((value) => String(value).includes("slow")))
      await new Promise((resolve) => setTimeout(resolve, 400));
    return inner.doEmbed(options);
  },
};

const [store] = process.argv.slice(2) as [string];
const server = await serveMemory({ store, apiKeys: { "key-a": "tenant-a" }, port: 0, embeddingModel });
process.stdout.write(`ready ${server.url}\n`);
process.once("SIGTERM", () => {
  void server.close().then(() => process.exit(0));
});
