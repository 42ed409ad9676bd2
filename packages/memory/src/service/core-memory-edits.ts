/** Applies an agent's core-memory edits to its blocks in memory; the store then saves all or none. */
import { MemoryError, type MemoryErrorCode } from "../errors/memory-error.ts";
import { type CoreMemoryEdit, DEFAULT_CORE_BLOCKS } from "../schemas/core-memory.ts";
import type { StoredBlock } from "../store/memory-store.ts";

type ParsedEdit =
  | Exclude<CoreMemoryEdit, { op: "create" }>
  | (Extract<CoreMemoryEdit, { op: "create" }> & { text: string });

function capacity(blocks: Map<string, StoredBlock>) {
  return [...blocks.values()].map((block) => ({
    label: block.label,
    limit: block.limit,
    remaining: block.limit - block.value.length,
  }));
}

function countOccurrences(haystack: string, needle: string): number {
  let count = 0;
  for (
    let index = haystack.indexOf(needle);
    index !== -1;
    index = haystack.indexOf(needle, index + needle.length)
  ) {
    count += 1;
  }
  return count;
}

export function applyCoreMemoryEdits(
  current: readonly StoredBlock[],
  edits: readonly ParsedEdit[],
  at: string,
): { block: StoredBlock; expectedVersion: number }[] {
  const blocks = new Map(current.map((block) => [block.label, block]));
  const expected = new Map(current.map((block) => [block.label, block.version]));
  for (const preset of DEFAULT_CORE_BLOCKS) {
    if (!blocks.has(preset.label)) {
      blocks.set(preset.label, {
        label: preset.label,
        value: "",
        limit: preset.limit,
        version: 0,
        updatedAt: at,
      });
      expected.set(preset.label, 0);
    }
  }
  const fail = (code: MemoryErrorCode, message: string, status: number, data: Record<string, unknown>) =>
    new MemoryError(code, message, status, { data: { ...data, blocks: capacity(blocks) } });
  for (const [index, edit] of edits.entries()) {
    const block = blocks.get(edit.label);
    if (edit.op === "create") {
      if (block && (block.version > 0 || block.value.length > 0)) {
        throw fail("conflict", `Block "${edit.label}" already exists`, 409, { index, label: edit.label });
      }
      if (edit.text.length > edit.limit) {
        throw fail(
          "capacity_exceeded",
          `Block "${edit.label}" text exceeds its limit of ${edit.limit}`,
          422,
          {
            index,
            label: edit.label,
            limit: edit.limit,
            length: edit.text.length,
          },
        );
      }
      blocks.set(edit.label, {
        label: edit.label,
        value: edit.text,
        limit: edit.limit,
        version: 0,
        updatedAt: at,
      });
      if (!expected.has(edit.label)) expected.set(edit.label, 0);
      continue;
    }
    if (!block) {
      throw fail("not_found", `Block "${edit.label}" does not exist; create it first`, 404, {
        resource: "block",
        id: edit.label,
        index,
        label: edit.label,
      });
    }
    let value: string;
    if (edit.op === "append") {
      value = block.value.length > 0 ? `${block.value}\n${edit.text}` : edit.text;
    } else if (edit.op === "rewrite") {
      value = edit.text;
    } else {
      const occurrences = countOccurrences(block.value, edit.oldText);
      if (occurrences === 0) {
        throw fail("edit_no_match", `Block "${edit.label}" does not contain the exact text to replace`, 422, {
          index,
          label: edit.label,
          oldText: edit.oldText,
        });
      }
      if (occurrences > 1) {
        throw fail(
          "edit_ambiguous",
          `Block "${edit.label}" contains the text to replace ${occurrences} times`,
          422,
          {
            index,
            label: edit.label,
            occurrences,
          },
        );
      }
      value = block.value.replace(edit.oldText, () => edit.newText);
    }
    if (value.length > block.limit) {
      throw fail(
        "capacity_exceeded",
        `Block "${edit.label}" would hold ${value.length} of ${block.limit} characters`,
        422,
        {
          index,
          label: edit.label,
          limit: block.limit,
          length: value.length,
          remaining: block.limit - block.value.length,
        },
      );
    }
    blocks.set(edit.label, { ...block, value, updatedAt: at });
  }
  const changes: { block: StoredBlock; expectedVersion: number }[] = [];
  for (const [label, block] of blocks) {
    const version = expected.get(label) ?? 0;
    const original = current.find((item) => item.label === label);
    if (original && original.value === block.value && original.limit === block.limit) continue;
    changes.push({ block: { ...block, version: version + 1 }, expectedVersion: version });
  }
  return changes;
}
