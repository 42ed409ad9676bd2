/** @tackle/mesh: one process per machine serves every module's tools over NATS, in any language. */
export type { NatsConnection } from "@nats-io/transport-node";
export type { JsonSchema, Logger, ToolCallResult, ToolSet } from "@tackle/core";
export type { BundleContext, BundleExport } from "./bundles/import-bundle.ts";
export {
  type LoadError,
  type LoadedModule,
  type LoadModulesOptions,
  loadModules,
  RESERVED_TOOL_NAME,
} from "./bundles/load-modules.ts";
export {
  type BrokerStatus,
  type CreateMeshClientOptions,
  createMeshClient,
  type MeshCallOptions,
  type MeshClient,
  type RetryBudgetOptions,
  type RetryOverloadedOptions,
} from "./client/create-mesh-client.ts";
export type { NodeWatchOptions } from "./client/node-watch.ts";
export { loadMeshConfig, type MeshConfig, type ModuleEntry } from "./config/load-mesh-config.ts";
export { defaultModulePrefix, defaultSeatPrefix } from "./config/names.ts";
export {
  DEFAULT_CONSOLE_LISTEN,
  formatListenAddress,
  type ListenAddress,
  parseListenAddress,
} from "./config/parse-listen.ts";
export { redactBrokerUrl } from "./config/redact-broker-url.ts";
export {
  type CredentialRole,
  type IssuedCredential,
  issueClientCredential,
  issueIssuerCredential,
  issueNodeCredential,
  issueSystemCredential,
  revokeCredential,
} from "./credentials/issue-credential.ts";
export {
  createMeshAuthority,
  type MeshAuthority,
  serverConfig,
} from "./credentials/mesh-authority.ts";
export {
  type IssuedRecord,
  initOperatorHome,
  type OperatorHome,
  openOperatorHome,
  recordIssued,
  recordRevoked,
} from "./credentials/operator-home.ts";
export {
  clientPermissions,
  type ModuleReach,
  nodePermissions,
  resultsBucket,
  type SubjectPermissions,
} from "./credentials/permissions.ts";
export { pushAccount } from "./credentials/push-account.ts";
export { MeshConfigError } from "./errors/mesh-config-error.ts";
export type { MeshErrorCode, MeshToolError } from "./errors/mesh-error-code.ts";
export { MeshPrefixConflictError, type PrefixConflict } from "./errors/mesh-prefix-conflict-error.ts";
export { MeshSeatTakenError } from "./errors/mesh-seat-taken-error.ts";
export {
  type IssueMembershipOptions,
  issueMembership,
  listMemberships,
  type MeshBuckets,
  openMeshBuckets,
  readCatalogue,
  revokeMembership,
} from "./membership/membership-store.ts";
export {
  CATALOGUE_BUCKET,
  type CatalogueRecord,
  MEMBERSHIP_BUCKET,
  type MembershipRecord,
} from "./membership/records.ts";
export type { CallEvent, EventLogLevel } from "./nats/call-events.ts";
export { type ConnectMeshOptions, connectMesh, DEFAULT_BROKER_URL } from "./nats/connect-mesh.ts";
export type { CallLimits } from "./runtime/admission.ts";
export type { ModuleInfo, ModuleToolInfo } from "./runtime/module-info.ts";
export {
  type NodeRuntime,
  type StartNodeRuntimeOptions,
  startNodeRuntime,
} from "./runtime/start-node-runtime.ts";
