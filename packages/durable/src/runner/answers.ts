/**
 * Answers to a paused run's interrupts, checked before anything is stored: approvals normalized,
 * edited arguments validated against the tool's input schema and bound to their fingerprint, and
 * expired approvals answered as such.
 */
import { Validator } from "@cfworker/json-schema";
import { DurableError } from "../errors/durable-error.ts";
import type { InterruptRequest } from "../interrupt/interrupt.ts";
import { fingerprint } from "../tool/fingerprint.ts";

interface ApprovalRequestShape {
  readonly kind: "approval";
  readonly expiresAt?: string;
  readonly inputSchema?: Record<string, unknown>;
}

function approvalOf(entry: InterruptRequest): ApprovalRequestShape | undefined {
  const request = entry.request as { kind?: unknown } | null;
  return typeof request === "object" && request !== null && request.kind === "approval"
    ? (request as ApprovalRequestShape)
    : undefined;
}

/** When an open approval stops being answerable (ms since the epoch), or undefined. */
export function expiryOf(entry: InterruptRequest): number | undefined {
  const expiresAt = approvalOf(entry)?.expiresAt;
  if (expiresAt === undefined) return undefined;
  const at = Date.parse(expiresAt);
  return Number.isNaN(at) ? undefined : at;
}

/** Adds the fingerprint of edited arguments, so a replayed answer compares equal to the stored one. */
export function withEditFingerprint(answer: unknown): unknown {
  if (typeof answer !== "object" || answer === null) return answer;
  const edited = (answer as { editedArgs?: unknown }).editedArgs;
  if (edited === undefined) return answer;
  return { ...answer, fingerprint: fingerprint(edited).slice(0, 16) };
}

/** Checks one answer against the interrupt it answers; throws `invalid_edit` or `approval_expired`. */
export function checkAnswer(entry: InterruptRequest, answer: unknown, now: number): void {
  const approval = approvalOf(entry);
  if (approval === undefined) return;
  const shape =
    typeof answer === "boolean" ? { approved: answer } : (answer as Record<string, unknown> | null);
  const approved = typeof shape === "object" && shape !== null && shape.approved === true;
  const at = expiryOf(entry);
  if (approved && at !== undefined && at <= now) {
    throw new DurableError(
      "approval_expired",
      `The approval "${entry.id}" expired at ${approval.expiresAt}; it can only be declined or cancelled now`,
      { data: { id: entry.id, expiresAt: approval.expiresAt } },
    );
  }
  const edited = typeof shape === "object" && shape !== null ? shape.editedArgs : undefined;
  if (edited === undefined) return;
  if (!approved) {
    throw new DurableError("invalid_edit", `Edited arguments for "${entry.id}" come with an approval`, {
      data: { id: entry.id },
    });
  }
  if (typeof edited !== "object" || edited === null || Array.isArray(edited)) {
    throw new DurableError("invalid_edit", `The edited arguments for "${entry.id}" are not an object`, {
      data: { id: entry.id },
    });
  }
  // Without a schema the node itself decides what to take from the edit (it gets the object as sent).
  if (approval.inputSchema === undefined) return;
  const draft = String(approval.inputSchema.$schema ?? "").includes("draft-07") ? "7" : "2020-12";
  const result = new Validator(approval.inputSchema as never, draft, false).validate(edited);
  if (!result.valid) {
    const errors = result.errors
      .filter((error) => error.keyword !== "properties" && error.keyword !== "$ref")
      .map((error) => `${error.instanceLocation}: ${error.error}`);
    throw new DurableError(
      "invalid_edit",
      `The edited arguments for "${entry.id}" do not match the tool's input schema: ${errors.join("; ")}`,
      { data: { id: entry.id, errors } },
    );
  }
}

/** The answer a resume gives an approval nobody answered before it expired. */
export function expiredAnswer(entry: InterruptRequest): unknown {
  const expiresAt = approvalOf(entry)?.expiresAt;
  return { approved: false, expired: true, reason: `approval expired at ${expiresAt} without an answer` };
}
