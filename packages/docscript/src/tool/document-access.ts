/**
 * Which documents a tool's calls may open. A tool usually holds a host credential, which opens every
 * document of its server; the host says which of those a call may touch, and the tool asks before any
 * read. A refused id answers exactly as a document that does not exist, so ids cannot be probed.
 */
import type { Identity, Logger } from "@tackle/core";
import { DocumentClientError } from "../client/document-client-error.ts";

/** What `authorize` is told about a call: its op and, through a tool set, the caller's identity. */
export interface DocumentAccessContext {
  /** `snapshot`, `run-edit-script`, `commit-plan`, or `context` for `getModelContext`. */
  readonly op: string;
  readonly identity?: Identity;
  readonly callId?: string;
}

/**
 * Exactly one of: `documents`, the fixed ids every call may open; or `authorize`, asked per call (a
 * thrown error or a promise that rejects refuses the call, as `false` does).
 */
export type DocumentAccess =
  | { readonly documents: readonly string[]; readonly authorize?: never }
  | {
      readonly authorize: (docId: string, context: DocumentAccessContext) => boolean | Promise<boolean>;
      readonly documents?: never;
    };

/** The check a tool runs before each call; throws when the options name no rule, or two. */
export function documentAccess(
  options: Partial<Record<keyof DocumentAccess, unknown>>,
  logger: Logger,
): (docId: string, context: DocumentAccessContext) => Promise<DocumentClientError | undefined> {
  const { documents, authorize } = options;
  if ((documents === undefined) === (authorize === undefined))
    throw new TypeError(
      "createDocScriptTool: say which documents a call may open, with `documents` (a list of ids) or `authorize(docId, context)`, not both",
    );
  if (
    documents !== undefined &&
    !(Array.isArray(documents) && documents.every((id) => typeof id === "string"))
  )
    throw new TypeError("createDocScriptTool: `documents` is a list of document ids");
  if (authorize !== undefined && typeof authorize !== "function")
    throw new TypeError("createDocScriptTool: `authorize` is a function (docId, context) => boolean");
  const fixed = documents === undefined ? undefined : new Set(documents as readonly string[]);
  const ask = authorize as
    | ((docId: string, context: DocumentAccessContext) => boolean | Promise<boolean>)
    | undefined;
  return async (docId, context) => {
    let allowed = false;
    if (fixed !== undefined) allowed = fixed.has(docId);
    else {
      try {
        allowed = (await ask?.(docId, context)) === true;
      } catch (error) {
        logger.warn("docscript: authorize threw; the call is refused", {
          docId,
          error: error instanceof Error ? error.message : String(error),
        });
        allowed = false;
      }
    }
    return allowed ? undefined : notFound(docId);
  };
}

/** The answer the document server gives for a document that does not exist (or that a token does not open). */
export function notFound(docId: string): DocumentClientError {
  return DocumentClientError.notFound(
    "document",
    docId,
    `document ${docId}: no document ${docId} opens with this token`,
  );
}
