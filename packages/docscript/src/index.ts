/** @tackle/docscript: a model edits a structured Loro document by a script that lands as one CRDT update. */

export {
  createDocumentClient,
  type DocumentClient,
  type DocumentClientOptions,
  type PageQuery,
  type PullResult,
} from "./client/create-document-client.ts";
export { DocumentClientError } from "./client/document-client-error.ts";
export {
  type CreateEntityInput,
  type DocumentSession,
  type DocumentSessionOptions,
  type EntityFilter,
  type FieldRange,
  type LinkInput,
  type MoveTarget,
  type OrderedEnd,
  openDocument,
  type RelationFilter,
} from "./document/document-session.ts";
export { type InterpretedDocument, interpretDocument, projectDocument } from "./document/interpret.ts";
export type { Projection } from "./document/projection.ts";
export { decodeVersion, encodeVersion } from "./document/version.ts";
export {
  type Cardinality,
  defineSchema,
  type EntityKind,
  type Invariant,
  type RelationKind,
  type RelationShape,
  type Schema,
  type SchemaInput,
  type SlotBinding,
  type SlotSpec,
} from "./schema/define-schema.ts";
export { DocScriptError } from "./schema/docscript-error.ts";
export {
  type BooleanField,
  type FieldSpec,
  field,
  type ListField,
  type NullField,
  type NumberField,
  type RecordField,
  type StringField,
  type TextField,
} from "./schema/field.ts";
export { SchemaDefinitionError } from "./schema/schema-definition-error.ts";
export type { DocumentIssue, DocumentView, Entity, Relation } from "./schema/types.ts";
export type { ChangePage, DocumentChange, RowCounts } from "./server/change-log.ts";
export type { EntityPage, PlanState, RelationPage } from "./server/document-host.ts";
export type { ConflictReason, PushResult } from "./server/push-result.ts";
export { timelineSchema } from "./timeline/timeline-schema.ts";
export { type Budgets, defaultBudgets } from "./tool/budget.ts";
export {
  type CommitPlanContext,
  commitPlan,
} from "./tool/commit-plan.ts";
export {
  createDocScriptTool,
  type DocScriptOutput,
  type DocScriptResult,
  type DocScriptTool,
  DocScriptToolError,
  type DocScriptToolOptions,
  type DocScriptToolSettings,
  type ModelContext,
  type ToolFailure,
} from "./tool/create-doc-script-tool.ts";
export { createEditScriptPool, type EditScriptPoolOptions } from "./tool/create-edit-script-pool.ts";
export type { DocumentAccess, DocumentAccessContext } from "./tool/document-access.ts";
export type { CommitOutcome, EditPlan } from "./tool/edit-plan.ts";
export type {
  DocScriptHooks,
  GenerationFact,
  LoadedEntityAsset,
  UploadedText,
} from "./tool/host-hooks.ts";
export type { FieldChange, PlanPreview, PreviewChange } from "./tool/plan-preview.ts";
export {
  type RunEditScriptContext,
  type RunEditScriptRequest,
  type RunEditScriptResult,
  runEditScript,
  type SchemaReference,
} from "./tool/run-edit-script.ts";
export type { StagePart } from "./tool/run-staging.ts";
export { scriptContract } from "./tool/script-contract.ts";
export type { SnapshotPage, SnapshotQuery } from "./tool/snapshot-page.ts";
