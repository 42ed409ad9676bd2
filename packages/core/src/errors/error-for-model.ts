/**
 * What a model reads of a failed call and of an answer that is not JSON (ADR 0533). A tool chooses its
 * error's message and data, so they are as large as it likes; the in-process adapters hand the model
 * an error within the answer budget, and a value JSON cannot write as a coded error instead of an
 * exception that sinks every other call of the turn.
 */
import { cutText } from "../mcp/result-pages/cut-text.ts";
import { countTokens, fitsTokens } from "../tokens/count-tokens.ts";
import { InvalidOutputError } from "./invalid-output-error.ts";
import type { ToolErrorPayload } from "./tool-error.ts";

/** What was left out of an error a model reads. */
export interface OmittedFromError {
  /** Characters of the message past its share of the budget. */
  readonly messageCharacters?: number;
  /** Characters of the data's JSON left out; `dataPreview` holds the first part. */
  readonly dataCharacters?: number;
  /** Why the data is absent: JSON cannot write it (a BigInt, a cycle, a throwing `toJSON`). */
  readonly dataNotJson?: string;
}

/** A coded error as a model reads it: whole when it fits, else cut with what was left out. */
export interface ModelError extends ToolErrorPayload {
  /** The first part of the data's JSON, when the data did not fit. */
  readonly dataPreview?: string;
  readonly omitted?: OmittedFromError;
}

/** JSON text of a value, or why JSON cannot write it. `undefined` writes as `null`. */
export function jsonText(value: unknown): { ok: true; text: string } | { ok: false; reason: string } {
  try {
    return { ok: true, text: JSON.stringify(value) ?? "null" };
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
}

/** The error a model reads for an answer JSON cannot write: a bug in the tool, as `invalid_output`. */
export function notJsonOutput(tool: string, reason: string): InvalidOutputError {
  return new InvalidOutputError(tool, [{ path: [], message: `The output is not JSON: ${reason}` }]);
}

/** The share of the budget a message may take before it is cut. */
const messageShare = 0.25;
/** Tokens kept for the fields around the message and the data. */
const frame = 64;

/**
 * The error within `budget` tokens (o200k), or `false` for no budget: the code and `retryable` always,
 * the message up to a quarter of the budget, the data whole when the rest holds it, else the first part
 * of its JSON as `dataPreview`. Data JSON cannot write is left out and named, with or without a budget.
 */
export function errorForModel(error: ToolErrorPayload, budget: number | false): ModelError {
  const data = error.data === undefined ? undefined : jsonText(error.data);
  if (data !== undefined && !data.ok) {
    const { data: _unwritable, ...rest } = error;
    return errorForModel({ ...rest, omitted: { dataNotJson: data.reason } } as ModelError, budget);
  }
  if (budget === false) return error;
  const whole = jsonText(error);
  if (whole.ok && fitsTokens(whole.text, budget)) return error;
  const { data: _data, ...head } = error as ModelError;
  const omitted: { -readonly [Key in keyof OmittedFromError]: OmittedFromError[Key] } = {
    ...head.omitted,
  };
  const messageLimit = Math.max(frame, Math.floor(budget * messageShare));
  let message = error.message;
  if (!fitsTokens(message, messageLimit)) {
    const end = cutText(message, 0, messageLimit);
    omitted.messageCharacters = message.length - end;
    message = `${message.slice(0, end)}…`;
  }
  const cut: ModelError = { ...head, message };
  if (data === undefined) return withOmitted(cut, omitted);
  let left = budget - countTokens(JSON.stringify(cut)) - frame;
  if (fitsTokens(data.text, left)) return withOmitted({ ...cut, data: error.data }, omitted);
  // The preview is written as a JSON string, its quotes escaped: cut again, shorter, until it fits.
  for (let attempt = 0; attempt < 4 && left > 0; attempt += 1) {
    const end = cutText(data.text, 0, left);
    const answer = withOmitted(
      { ...cut, dataPreview: data.text.slice(0, end) },
      { ...omitted, dataCharacters: data.text.length - end },
    );
    const over = countTokens(JSON.stringify(answer)) - budget;
    if (over <= 0) return answer;
    left -= over + frame;
  }
  return withOmitted(cut, { ...omitted, dataCharacters: data.text.length });
}

function withOmitted(error: ModelError, omitted: OmittedFromError): ModelError {
  const { omitted: _earlier, ...rest } = error;
  return Object.keys(omitted).length === 0 ? rest : { ...rest, omitted };
}
