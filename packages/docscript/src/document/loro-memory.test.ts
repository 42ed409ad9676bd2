import assert from "node:assert/strict";
import { it } from "node:test";
import { LoroDoc, LoroMap } from "loro-crdt";
import { keepLoroHeadroom, loroBytes, maxHeadroomBytes, sizeLoroHeadroom } from "./loro-memory.ts";

// First in the file: no headroom is kept yet in this process.
it("a run's small limit keeps little headroom: a sixteenth of it", () => {
  sizeLoroHeadroom(2 ** 20);
  const doc = new LoroDoc();
  const before = loroBytes();
  const rows = doc.getMap("entities");
  for (let index = 0; index < 2000; index++) {
    keepLoroHeadroom();
    rows.set(`row-${index}`, "x".repeat(1024));
  }
  doc.commit();
  keepLoroHeadroom();
  assert.ok(loroBytes() - before < 8 * 2 ** 20, `grew ${loroBytes() - before} bytes`);
  sizeLoroHeadroom(256 * 2 ** 20);
  doc.free();
});

it("Loro's memory grows a step at a time under writes that keep headroom, not a few pages at a time (ADR 0502)", () => {
  sizeLoroHeadroom(256 * 2 ** 20);
  const doc = new LoroDoc();
  const rows = doc.getMap("entities");
  const text = "x".repeat(4096);
  const start = loroBytes();
  let grows = 0;
  let size = start;
  // ~20 MiB of writes: each grow of the memory is seen between two writes.
  for (let index = 0; index < 5000; index++) {
    keepLoroHeadroom();
    const row = rows.setContainer(`row-${index}`, new LoroMap());
    row.set("name", `${text}${index}`);
    if (index % 100 === 99) doc.commit();
    if (loroBytes() !== size) {
      grows++;
      size = loroBytes();
    }
  }
  doc.commit();
  const grown = loroBytes() - start;
  assert.ok(grown > maxHeadroomBytes, `the writes grew Loro's memory by ${grown} bytes only`);
  assert.ok(
    grows <= Math.ceil(grown / maxHeadroomBytes) + 1,
    `${grows} grows for ${(grown / 2 ** 20).toFixed(1)} MiB`,
  );
  doc.free();
});
