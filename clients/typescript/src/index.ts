export { EngramClient, OPERATION_METHODS, type BlackboardEvent, type Schemas } from "./engram.js";
export {
  EngramTransport,
  type BodyOf,
  type CallArgs,
  type CallOptions,
  type EngramClientOptions,
  type ItemOf,
  type ListOperationId,
  type PathOf,
  type QueryOf,
  type ResultOf,
  type RetryPolicy,
} from "./client.js";
export * from "./errors.js";
export { parseEventStream, type ServerSentEvent } from "./sse.js";
export { OPERATIONS, type OperationId } from "./generated/operations.js";
export type { components, operations, paths } from "./generated/schema.js";
