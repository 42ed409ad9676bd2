/**
 * Errors that say what to change. A scripted model (no LLM: a function that reads only the tool's error
 * and the script it sent) fixes a syntax error, a runtime error and a refused write; each fix needs what
 * the error carries — the line and the offending source line in the script's own coordinates, and for a
 * refused write its issues (path, constraint, message, the value's shape), whether the script caught it
 * or not — and the fixed script then runs and commits.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { DocScriptResult } from "../src/tool/create-doc-script-tool.ts";
import { type Harness, musicVolume, startHarness } from "./harness.ts";

let harness: Harness;
let documents = 0;

async function freshDocument(): Promise<string> {
  const docId = `script-errors-${++documents}`;
  await harness.createDocument(docId);
  return docId;
}

interface ToolError {
  readonly code: string;
  readonly message: string;
  readonly data?: {
    readonly line?: number;
    readonly column?: number;
    readonly sourceLine?: string;
    readonly cause?: string;
    readonly detail?: {
      readonly issues?: readonly {
        path: (string | number)[];
        constraint: string;
        message: string;
        value?: string;
      }[];
    };
  };
}

function errorOf(result: DocScriptResult): ToolError {
  assert.equal(result.ok, false, JSON.stringify(result).slice(0, 600));
  return (result as { error: ToolError }).error;
}

/** The scripted model: given only its script and the error, it rewrites the line the error names. */
function scriptedFix(script: string, error: ToolError): string {
  const lines = script.split("\n");
  const line = error.data?.line;
  assert.ok(typeof line === "number", `the error names no line: ${JSON.stringify(error)}`);
  assert.equal(lines[line - 1], error.data?.sourceLine, "the quoted line is not the script's line");
  const issue = error.data?.detail?.issues?.[0];
  if (issue !== undefined) {
    // A bound from the issue's message, applied where the quoted line sets the issue's field.
    const bound = Number(/at most (-?\d+)/.exec(issue.message)?.[1]);
    assert.ok(Number.isFinite(bound), `no bound in ${issue.message}`);
    const field = String(issue.path.at(-1));
    assert.ok(lines[line - 1]!.includes(`'${field}'`), "the quoted line does not write the issue's field");
    lines[line - 1] = lines[line - 1]!.replace(/value: -?\d+/, `value: ${bound}`);
    return lines.join("\n");
  }
  if (error.code === "syntax_error") {
    lines[line - 1] = lines[line - 1]!.replace("= ;", "= -6;");
    return lines.join("\n");
  }
  // A runtime error on a missing entity: look it up the way the quoted line's neighbours do.
  assert.match(error.message, /undefined|null/);
  lines[line - 1] = lines[line - 1]!.replace("held.endpoint1EntityId", "bgmClip.endpoint1EntityId");
  return lines.join("\n");
}

const findBgm = `const bgm = entities.list().find((e) => e.entityKind === 'track' && e.payload.role === 'bgm');`;
const bgmClip = `const [bgmClip] = relations.of(bgm.entityId, 'contain').filter((r) => r.endpoint0EntityId === bgm.entityId);`;

describe("a model fixes its script from the error alone", () => {
  before(async () => {
    harness = await startHarness();
  });
  after(async () => {
    await harness.close();
  });

  const cases: { name: string; script: string; expect(error: ToolError): void; volume: number }[] = [
    {
      name: "a syntax error names its line and quotes it",
      script: [
        findBgm,
        bgmClip,
        "const volume = ;",
        `entities.update(bgmClip.endpoint1EntityId, [{ op: 'set', path: ['volume'], value: volume }]);`,
      ].join("\n"),
      expect(error) {
        assert.equal(error.code, "syntax_error");
        assert.equal(error.data?.line, 3);
        assert.match(error.message, /line 3/);
      },
      volume: -6,
    },
    {
      name: "a runtime error names its line, column and the offending line",
      script: [
        findBgm,
        bgmClip,
        "const held = relations.of('no-such-track', 'contain')[0];",
        `entities.update(held.endpoint1EntityId, [{ op: 'set', path: ['volume'], value: -9 }]);`,
      ].join("\n"),
      expect(error) {
        assert.equal(error.code, "runtime");
        assert.equal(error.data?.line, 4);
        assert.ok((error.data?.column ?? 0) >= 1);
        assert.match(error.message, /endpoint1EntityId/);
      },
      volume: -9,
    },
    {
      name: "an uncaught refused write carries its issues with the value's shape",
      script: [
        findBgm,
        bgmClip,
        `entities.update(bgmClip.endpoint1EntityId, [{ op: 'set', path: ['volume'], value: 20 }]);`,
      ].join("\n"),
      expect(error) {
        assert.equal(error.code, "runtime");
        assert.equal(error.data?.cause, "schema_violation");
        assert.equal(error.data?.line, 3);
        const [issue] = error.data?.detail?.issues ?? [];
        assert.deepEqual(issue?.path, ["volume"]);
        assert.equal(issue?.constraint, "field.max");
        assert.equal(issue?.value, "number 20");
      },
      volume: 12,
    },
  ];

  for (const each of cases) {
    test(each.name, async () => {
      const docId = await freshDocument();
      const tool = harness.tool();
      const failed = await tool.handle({ op: "run-edit-script", doc_id: docId, script: each.script });
      const error = errorOf(failed);
      each.expect(error);
      const fixed = scriptedFix(each.script, error);
      const run = await tool.handle({
        op: "run-edit-script",
        doc_id: docId,
        script: fixed,
        auto_commit: true,
      });
      assert.ok(
        run.ok && run.op === "run-edit-script" && run.commit?.status === "committed",
        JSON.stringify(run).slice(0, 600),
      );
      assert.equal(musicVolume(await harness.read(docId)), each.volume);
    });
  }

  test("a refused write the script catches carries the same issues", async () => {
    const docId = await freshDocument();
    const tool = harness.tool();
    const run = await tool.handle({
      op: "run-edit-script",
      doc_id: docId,
      script: `${findBgm}\n${bgmClip}
try { entities.update(bgmClip.endpoint1EntityId, [{ op: 'set', path: ['volume'], value: 20 }]); }
catch (error) { console.log(error.code, JSON.stringify(error.data.issues.map((issue) => [issue.path, issue.constraint, issue.value]))); }`,
    });
    assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run).slice(0, 600));
    assert.deepEqual(
      run.logs.map((line) => line.text),
      ['schema_violation [[["volume"],"field.max","number 20"]]'],
    );
  });
});
