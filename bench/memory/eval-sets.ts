/**
 * The evaluation sets of bench/memory and the ways a user's turns reach the service (a plain add of
 * `Speaker: text`, an episode with its speaker, the events API, an import, the capture middleware).
 */
import { readFileSync } from "node:fs";
import type { MemoryService } from "@tackle/memory";
import { createMemoryMiddlewareCore } from "../../packages/memory/src/middleware/create-memory-middleware-core.ts";

export interface Turn {
  readonly id: string;
  readonly speaker: string;
  readonly text: string;
}
export interface Conversation {
  readonly id: string;
  readonly split: "dev" | "held-out";
  readonly speakers?: readonly string[];
  readonly sessions: readonly { id: number; date: string; turns: readonly Turn[] }[];
  readonly questions: readonly { question: string; category: string; evidence: readonly string[] }[];
}
export interface EvalSet {
  readonly name: string;
  /** Read only for the final figure: no choice was made on it. */
  readonly heldOut: boolean;
  /** Turns carry named speakers (`Speaker: text`); otherwise user and assistant. */
  readonly speakers: boolean;
  readonly conversations: readonly Conversation[];
}

const load = (file: string) => {
  const text = readFileSync(new URL(file, import.meta.url), "utf8");
  return file.endsWith(".txt")
    ? parseWritten(text)
    : (JSON.parse(text) as { conversations: Conversation[] }).conversations;
};

/** The hand-written set's text format (eval/written.txt says it in its header). */
export function parseWritten(text: string): Conversation[] {
  const conversations: {
    id: string;
    split: "dev" | "held-out";
    speakers: string[];
    sessions: { id: number; date: string; turns: Turn[] }[];
    questions: { question: string; category: string; evidence: string[] }[];
  }[] = [];
  for (const line of text.split("\n")) {
    const current = conversations.at(-1);
    if (line.startsWith("#") || line.trim() === "") continue;
    if (line.startsWith("= ")) {
      const [id, split, speakers] = line.slice(2).split(" | ");
      conversations.push({
        id: id!,
        split: split as "dev" | "held-out",
        speakers: speakers!.split(", "),
        sessions: [],
        questions: [],
      });
    } else if (line.startsWith("@ ")) {
      current!.sessions.push({ id: current!.sessions.length + 1, date: line.slice(2).trim(), turns: [] });
    } else if (line.startsWith("? ")) {
      const [category, question, evidence] = line.slice(2).split(" | ");
      current!.questions.push({
        category: category!,
        question: question!,
        evidence: evidence!.trim().split(" "),
      });
    } else {
      const session = current!.sessions.at(-1)!;
      const colon = line.indexOf(": ");
      session.turns.push({
        id: `D${session.id}:${session.turns.length + 1}`,
        speaker: line.slice(0, colon),
        text: line.slice(colon + 2),
      });
    }
  }
  return conversations;
}

/**
 * The sets, in the order the tables print them. `only` keeps the sets whose name or file names
 * contain it (`--set=long-dev`: the long written dev set alone).
 */
export function loadSets(only?: string): EvalSet[] {
  return [
    {
      name: "conversations (generator A: user and assistant)",
      files: ["./eval/conversations.json"],
      heldOut: false,
      speakers: false,
    },
    {
      name: "dialogues (generator B: two named speakers)",
      files: ["./eval/dialogues.json"],
      heldOut: false,
      speakers: true,
    },
    {
      name: "written short (by hand; was held out until ADR 0521)",
      files: ["./eval/written.txt"],
      heldOut: false,
      speakers: true,
    },
    {
      name: "written long (by hand, dev; long-3..32 held out until ADRs 0522, 0526–0529)",
      files: Array.from({ length: 32 }, (_, index) => `./eval/long-${index + 1}.txt`),
      tag: "long-dev",
      heldOut: false,
      speakers: true,
    },
    {
      name: "written long (by hand, held out)",
      files: [33, 34, 35, 36, 37, 38, 39, 40].map((number) => `./eval/long-${number}.txt`),
      tag: "long-held-out",
      heldOut: true,
      speakers: true,
    },
  ]
    .filter(
      (set) =>
        only === undefined ||
        set.tag === only ||
        (set.tag === undefined && set.files.some((file) => file.includes(only))),
    )
    .map(({ files, tag: _tag, ...set }) => ({ ...set, conversations: files.flatMap(load) }));
}

export const turnCount = (set: EvalSet) =>
  set.conversations.reduce(
    (sum, conversation) =>
      sum + conversation.sessions.reduce((inner, session) => inner + session.turns.length, 0),
    0,
  );

/** `Speaker: text` for a named speaker; the text alone for a user or an assistant. */
export const turnText = (set: EvalSet, turn: Turn) =>
  set.speakers ? `${turn.speaker}: ${turn.text}` : turn.text;

export const ingestPaths = ["episode", "plain", "events", "import", "capture"] as const;
export type IngestPath = (typeof ingestPaths)[number];

export const pathLabels: Record<IngestPath, string> = {
  episode: "add as an episode with metadata.speaker, clock at the session's date",
  plain: "plain add of `Speaker: text` (no kind, no metadata), clock at the session's date",
  events: "events API (role, metadata.speaker, occurredAt)",
  import: "import job (OpenAI messages with `name` and `created_at`)",
  capture: "capture middleware (user turn, assistant reply), clock at the session's date",
};

/** A turn's id is found again through the memory that holds its text. */
export type TurnIndex = Map<string, string>;

/**
 * Stores one conversation through `path` and answers a map from memory content (and turn id, where
 * the path keeps metadata) to the turn's id, so a ranked memory names the turn it holds.
 */
export async function ingest(
  service: MemoryService,
  set: EvalSet,
  conversation: Conversation,
  path: IngestPath,
  setClock: (at: Date) => void,
): Promise<void> {
  const userId = conversation.id;
  const roleOf = (turn: Turn) =>
    set.speakers
      ? turn.speaker === (conversation.speakers?.[0] ?? turn.speaker)
        ? "user"
        : "assistant"
      : turn.speaker === "user"
        ? "user"
        : "assistant";
  if (path === "import") {
    setClock(new Date(Date.parse(conversation.sessions.at(-1)!.date) + 86_400_000));
    const job = await service.importConversations("eval", {
      userId,
      format: "openai",
      infer: true,
      conversations: conversation.sessions.map((session) => ({
        id: `${conversation.id}-${session.id}`,
        messages: session.turns.map((turn, index) => ({
          role: roleOf(turn),
          content: turn.text,
          ...(set.speakers ? { name: turn.speaker } : {}),
          created_at: new Date(Date.parse(session.date) + index * 60_000).toISOString(),
        })),
      })),
    });
    await waitForJob(service, job.job.id);
    return;
  }
  if (path === "capture") {
    const core = createMemoryMiddlewareCore({
      userId,
      client: {
        contextBundle: (request) => service.contextBundle("eval", request),
        writeEvent: (request) => service.writeEvent("eval", request),
      },
      inject: false,
      awaitCapture: true,
      cache: false,
    });
    for (const session of conversation.sessions) {
      const turns = session.turns;
      for (let index = 0; index < turns.length; index += 1) {
        setClock(new Date(Date.parse(session.date) + index * 60_000));
        const first = turns[index]!;
        const next = turns[index + 1];
        // A user turn and the reply after it are one model call; a lone last turn is a call without one.
        if (next !== undefined && roleOf(first) === "user" && roleOf(next) === "assistant") {
          await core.captureTurn({ userId }, [{ role: "user", text: first.text }], next.text);
          index += 1;
        } else {
          await service.writeEvent("eval", { userId, role: roleOf(first), content: first.text });
        }
      }
    }
    await core.flush();
    return;
  }
  for (const session of conversation.sessions) {
    for (const [index, turn] of session.turns.entries()) {
      setClock(new Date(Date.parse(session.date) + index * 60_000));
      if (path === "episode") {
        await service.add("eval", {
          userId,
          kind: "episode",
          content: turnText(set, turn),
          metadata: { speaker: turn.speaker },
        });
      } else if (path === "plain") {
        await service.add("eval", { userId, content: turnText(set, turn) });
      } else {
        await service.writeEvent("eval", {
          userId,
          role: roleOf(turn),
          content: turn.text,
          ...(set.speakers ? { metadata: { speaker: turn.speaker } } : {}),
          occurredAt: new Date(Date.parse(session.date) + index * 60_000).toISOString(),
        });
      }
    }
  }
}

async function waitForJob(service: MemoryService, id: string) {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const { job } = await service.getJob("eval", id);
    if (job.status === "succeeded") return;
    if (job.status === "failed") throw new Error(`import ${id} ${job.status}`);
    if (Date.now() > deadline) throw new Error(`import ${id} still ${job.status} after 600 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The turn a ranked memory holds: by its text (a path may prefix the speaker or split a turn). */
export function turnFinder(
  set: EvalSet,
  conversation: Conversation,
): (content: string) => string | undefined {
  const byText = new Map<string, string>();
  for (const session of conversation.sessions) {
    for (const turn of session.turns) {
      byText.set(turn.text.trim(), turn.id);
      byText.set(turnText(set, turn).trim(), turn.id);
    }
  }
  const turns = conversation.sessions.flatMap((session) => session.turns);
  return (content) => {
    const text = content.trim();
    const exact = byText.get(text) ?? byText.get(text.replace(/^[^:\n]{1,40}:\s+/u, ""));
    if (exact !== undefined) return exact;
    // An extracted sentence of a turn names the turn it came from.
    return turns.find((turn) => turn.text.includes(text))?.id;
  };
}

export interface Score {
  readonly recall5: number;
  readonly recall10: number;
  readonly recall20: number;
}

/** Recall@k: the share of a question's evidence turns among the first k distinct turns ranked. */
export function score(ranked: readonly (string | undefined)[], evidence: readonly string[]): Score {
  const distinct = [...new Set(ranked.filter((id): id is string => id !== undefined))];
  const recallAt = (k: number) =>
    evidence.filter((id) => distinct.slice(0, k).includes(id)).length / evidence.length;
  return { recall5: recallAt(5), recall10: recallAt(10), recall20: recallAt(20) };
}
