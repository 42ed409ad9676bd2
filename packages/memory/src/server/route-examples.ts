/**
 * One example request per route, shown in `/openapi.json` (a request body's `example`, each
 * parameter's `example`); a test checks each against the document's own schemas and sends it.
 */
export interface RouteExample {
  readonly body?: Record<string, unknown>;
  readonly query?: Readonly<Record<string, string>>;
  readonly id?: string;
}

const memoryId = "7f9c2a1e-4b1d-4c9a-9a57-2f0e8c1d3b6a";
const ada = { userId: "ada" } as const;

export const routeExamples: Readonly<Record<string, RouteExample>> = {
  search: { body: { ...ada, query: "Which seat does Ada prefer?", limit: 5 } },
  add: { body: { ...ada, kind: "preference", content: "Ada prefers window seats." } },
  addBatch: {
    body: {
      ...ada,
      sessionId: "trip-2026-05",
      memories: [
        { kind: "episode", content: "Ada: I land in Lisbon on Friday.", metadata: { speaker: "Ada" } },
        { kind: "fact", content: "Ada is vegetarian." },
      ],
    },
  },
  listMemories: { query: { ...ada, kind: "preference", limit: "20" } },
  getMemory: { id: memoryId, query: ada },
  updateMemory: {
    id: memoryId,
    query: ada,
    body: { content: "Ada prefers aisle seats now.", expectedVersion: 1, reason: "she said so" },
  },
  deleteMemory: { id: memoryId, query: { ...ada, reason: "asked to forget" } },
  memoryHistory: { id: memoryId, query: ada },
  chainTrace: { id: memoryId, query: ada },
  recordProcedureOutcome: { id: memoryId, query: ada, body: { success: true, note: "worked first time" } },
  recordFeedback: { id: memoryId, query: ada, body: { rating: "helpful" } },
  writeEvent: {
    body: { ...ada, sessionId: "trip-2026-05", role: "user", content: "I'm allergic to peanuts." },
  },
  recallConversation: { body: { ...ada, sessionId: "trip-2026-05", limit: 20, order: "asc" } },
  ingestDocument: {
    body: {
      ...ada,
      title: "Travel policy",
      content: "Economy for flights under six hours. Business above.",
      source: "https://intranet.example/policy",
    },
  },
  searchKnowledge: { body: { wholeTenant: true, query: "business class", limit: 3 } },
  selfEdit: { body: { ...ada, edits: [{ op: "append", label: "human", text: "Prefers window seats." }] } },
  profile: { body: ada },
  contextBundle: { body: { ...ada, query: "Book Ada's flight to Lisbon", tokenBudget: 800 } },
  unifiedState: { body: ada },
  status: {},
  noveltyScan: { body: { ...ada, candidates: ["Ada likes window seats.", "Ada has a dog."] } },
  consolidate: { body: { ...ada, similarityThreshold: 0.9 } },
  // A ChatGPT export's conversation as `conversations.json` holds it (trimmed): the shown turns are the
  // branch from `current_node` up to the root. `format: "openai"` takes `{ messages: [{ role, content }] }`.
  importConversations: {
    body: {
      ...ada,
      format: "chatgpt-export",
      conversations: [
        {
          id: "6650b1f2-0c4d-8001-a1b2-4c1e5d6f7a8b",
          title: "Moving to Porto",
          create_time: 1714550400.5,
          mapping: {
            root: { id: "root", message: null, parent: null, children: ["q1"] },
            q1: {
              id: "q1",
              message: {
                author: { role: "user" },
                content: { content_type: "text", parts: ["My name is Ada and I live in Porto."] },
                create_time: 1714550400.5,
              },
              parent: "root",
              children: ["a1"],
            },
            a1: {
              id: "a1",
              message: {
                author: { role: "assistant" },
                content: { content_type: "text", parts: ["Nice to meet you, Ada."] },
                create_time: 1714550410.25,
              },
              parent: "q1",
              children: [],
            },
          },
          current_node: "a1",
        },
      ],
    },
  },
  listJobs: { query: { ...ada, type: "import", limit: "10" } },
  getJob: { id: memoryId, query: ada },
  accessTrends: { body: { ...ada, days: 7 } },
  accessSummaries: { body: { limit: 5 } },
  purge: { body: { userId: "ada-deleted-account" } },
  listTraces: { query: { ...ada, operation: "search", limit: "10" } },
  getTrace: { id: memoryId, query: ada },
};
