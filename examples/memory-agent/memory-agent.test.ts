import assert from "node:assert/strict";
import { it } from "node:test";
import { underLoadMs } from "@tackle/test-support";
import { runMemoryAgentDemo } from "./main.ts";

it("the memory agent learns in one session and uses it in the next", async (context) => {
  // The agent's 300 ms wait for its memory is a product default; on a loaded machine the server's
  // answer takes longer, and the model, called without it, cannot know the user is vegetarian.
  const demo = await runMemoryAgentDemo({ contextTimeoutMs: underLoadMs(300) });
  context.after(() => demo.close());
  assert.deepEqual(
    demo.transcript.map((exchange) => exchange.agent),
    [
      "I don't know anything about that yet.",
      "Got it — I'll remember that.",
      "Since you're vegetarian, how about a mushroom risotto tonight?",
    ],
  );
  const { results } = await demo.client.search({ userId: "sam", query: "vegetarian" });
  assert.ok(
    results.some(
      (result) =>
        result.memory.content === "The user says: I am vegetarian" && result.memory.userId === "sam",
    ),
    "the memory_add tool stored it for sam",
  );
  const monday = await demo.client.recallConversation({ userId: "sam", sessionId: "monday", order: "asc" });
  assert.deepEqual(
    monday.events.map((event) => event.role),
    ["user", "assistant", "user", "assistant"],
    "every turn was captured",
  );
});
