/** `@tackle/memory/test`: fakes for users' own tests. */
export {
  createHashingTestEmbedder,
  embedTextForTest,
  type HashingTestEmbedderOptions,
} from "./create-hashing-test-embedder.ts";
