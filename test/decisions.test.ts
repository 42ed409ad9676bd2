/**
 * The decision records stay readable as a set: every ADR opens with a status line, every ADR is listed in
 * the index, and a superseded one is marked there with what superseded it.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { it } from "node:test";

const folder = path.join(import.meta.dirname, "..", "docs", "decisions");
const records = readdirSync(folder).filter((file) => /^\d{4}-.*\.md$/.test(file));
const index = readFileSync(path.join(folder, "README.md"), "utf8");
const statusLine =
  /^Status: (proposed|accepted|superseded by \d{4}|accepted; superseded in part by \d{4}(, \d{4})*)$/;

it("every ADR opens with a status line: proposed, accepted or superseded by N", () => {
  assert.ok(records.length > 0);
  for (const file of records) {
    const lines = readFileSync(path.join(folder, file), "utf8").split("\n");
    // `Status: accepted`, or in bold (`**Status:** accepted`).
    const status = lines
      .slice(1, 6)
      .map((line) => line.replaceAll("*", ""))
      .find((line) => line.startsWith("Status:"));
    assert.ok(status !== undefined, `${file} has no Status: line under its title`);
    assert.match(status, statusLine, `${file}: ${status}`);
  }
});

it("the index lists every ADR and marks the superseded ones", () => {
  for (const file of records) {
    const entry = index.split("\n").find((line) => line.includes(`](${file})`));
    assert.ok(entry !== undefined, `docs/decisions/README.md does not list ${file}`);
    const status = readFileSync(path.join(folder, file), "utf8")
      .split("\n")
      .map((line) => line.replaceAll("*", ""))
      .find((line) => line.startsWith("Status:"));
    const superseded = /superseded (in part )?by [\d, ]+/.exec(status ?? "")?.[0];
    if (superseded !== undefined)
      assert.ok(entry.includes(superseded), `the index does not mark ${file} ${superseded}`);
  }
});
