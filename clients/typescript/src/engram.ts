import type { components } from "./generated/schema.js";
import type { OperationId } from "./generated/operations.js";
import {
  EngramTransport,
  type BodyOf,
  type CallOptions,
  type EngramClientOptions,
  type QueryOf,
  type ResultOf,
} from "./client.js";
import type { ServerSentEvent } from "./sse.js";

/** A schema component by name (`Schemas["Memory"]`). */
export type Schemas = components["schemas"];

/** One blackboard write as the execution's event stream delivers it. */
export interface BlackboardEvent {
  /** `<field>@<version>`: pass as `lastEventId` to say where you are. */
  id: string;
  entry: Schemas["BlackboardEntry"];
}

type Q<K extends OperationId> = QueryOf<K>;
type B<K extends OperationId> = BodyOf<K>;
type R<K extends OperationId> = Promise<ResultOf<K>>;
type O = CallOptions;

/**
 * The Engram API for an agent (its API key). Grouped like the API: `memories`, `events`, `facts`,
 * `entities`, `graph`, `contradictions`, `checkpoints`, `blackboard`, `scratchpad`, `executions`,
 * `sessions`, `context`, `skills`, `tools`, `store`, `me`. Every method maps to one operation of
 * the schema (`OPERATION_METHODS`); `call(operationId, ...)` reaches any of them by id, and
 * `items(operationId, ...)` iterates every page of a list. Errors:
 * `EngramError` subclasses and `TransportError` (see `EngramTransport`).
 */
export class EngramClient extends EngramTransport {
  constructor(options: EngramClientOptions) {
    super(options);
  }

  /** The calling agent and its tenant. */
  me(o?: O): R<"me"> {
    return this.call("me", {}, o);
  }

  readonly memories = {
    /** Store one memory or a batch (an array). */
    create: (body: B<"memories_create">, o?: O): R<"memories_create"> => this.call("memories_create", { body }, o),
    /** A page of memories (newest first) filtered by `query`. */
    list: (query?: Q<"memories_list">, o?: O): R<"memories_list"> => this.call("memories_list", { query }, o),
    get: (memoryId: string, o?: O): R<"memories_get"> =>
      this.call("memories_get", { path: { memory_id: memoryId } }, o),
    /** The versions of a memory's update chain, oldest first, and the current one. */
    versions: (memoryId: string, o?: O): R<"memories_versions"> =>
      this.call("memories_versions", { path: { memory_id: memoryId } }, o),
    /** Forget a memory (erasure of that one memory). */
    forget: (memoryId: string, query?: Q<"memories_forget">, o?: O): R<"memories_forget"> =>
      this.call("memories_forget", { path: { memory_id: memoryId } as never, query }, o),
    /** Recall: the memories most relevant now (similarity, recency, importance). */
    search: (body: B<"memories_search">, o?: O): R<"memories_search"> => this.call("memories_search", { body }, o),
  };

  readonly events = {
    /** Append one event or a batch to the episodic log. */
    append: (body: B<"events_append">, o?: O): R<"events_append"> => this.call("events_append", { body }, o),
    list: (query?: Q<"events_list">, o?: O): R<"events_list"> => this.call("events_list", { query }, o),
  };

  readonly facts = {
    /** Assert one fact or a batch. */
    assert: (body: B<"facts_assert">, o?: O): R<"facts_assert"> => this.call("facts_assert", { body }, o),
    retract: (factId: number, body: B<"facts_retract">, o?: O): R<"facts_retract"> =>
      this.call("facts_retract", { path: { fact_id: factId } as never, body }, o),
  };

  readonly entities = {
    /** What is known about an entity (facts, and its neighbourhood with `depth`). */
    facts: (name: string, query?: Q<"entity_facts">, o?: O): R<"entity_facts"> =>
      this.call("entity_facts", { path: { name }, query }, o),
  };

  readonly graph = {
    path: (query: Q<"graph_path">, o?: O): R<"graph_path"> => this.call("graph_path", { query }, o),
  };

  readonly contradictions = {
    list: (query?: Q<"contradictions_list">, o?: O): R<"contradictions_list"> =>
      this.call("contradictions_list", { query }, o),
  };

  readonly checkpoints = {
    /** Save a checkpoint (its `idempotency_key` makes a retry a replay). */
    save: (sessionId: string, body: B<"checkpoints_save">, o?: O): R<"checkpoints_save"> =>
      this.call("checkpoints_save", { path: { session_id: sessionId }, body }, { retryUnkeyed: true, ...o }),
    list: (sessionId: string, query?: Q<"checkpoints_list">, o?: O): R<"checkpoints_list"> =>
      this.call("checkpoints_list", { path: { session_id: sessionId }, query }, o),
    /** Your latest checkpoint in the session (of `checkpoint_ns`, default the root). */
    latest: (sessionId: string, query?: Q<"checkpoints_latest">, o?: O): R<"checkpoints_latest"> =>
      this.call("checkpoints_latest", { path: { session_id: sessionId }, query }, o),
    get: (sessionId: string, stepIndex: number, o?: O): R<"checkpoints_get"> =>
      this.call("checkpoints_get", { path: { session_id: sessionId, step_index: stepIndex } }, o),
    /** Checkpoints in full with their pending writes, newest first (LangGraph's list). */
    tuples: (sessionId: string, query?: Q<"checkpoints_tuples">, o?: O): R<"checkpoints_tuples"> =>
      this.call("checkpoints_tuples", { path: { session_id: sessionId }, query }, o),
    /** Your checkpoints in every session in full, newest first (LangGraph's list without a thread). */
    all: (query?: Q<"checkpoints_tuples_all">, o?: O): R<"checkpoints_tuples_all"> =>
      this.call("checkpoints_tuples_all", { query }, o),
    /** A task's pending writes against a checkpoint. */
    writes: (sessionId: string, body: B<"checkpoints_writes">, o?: O): R<"checkpoints_writes"> =>
      this.call("checkpoints_writes", { path: { session_id: sessionId }, body }, { retryUnkeyed: true, ...o }),
    /** Delete your checkpoints in the session (LangGraph's deleteThread). */
    delete: (sessionId: string, query?: Q<"checkpoints_delete">, o?: O): R<"checkpoints_delete"> =>
      this.call("checkpoints_delete", { path: { session_id: sessionId }, query }, o),
  };

  readonly blackboard = {
    /** Every agent's fields of the execution's shared blackboard (or one agent's). */
    read: (executionId: string, query?: Q<"blackboard_read">, o?: O): R<"blackboard_read"> =>
      this.call("blackboard_read", { path: { execution_id: executionId }, query }, o),
    field: (executionId: string, agent: string, field: string, o?: O): R<"blackboard_field"> =>
      this.call("blackboard_field", { path: { execution_id: executionId, agent, field } }, o),
    /**
     * Write your field. With `expected_version` a compare-and-set: 0 means the field must not exist;
     * a stale version is a `Conflict` whose `body.current_version` is the field's version now.
     */
    write: (executionId: string, field: string, body: B<"blackboard_write">, o?: O): R<"blackboard_write"> =>
      this.call("blackboard_write", { path: { execution_id: executionId, field }, body }, o),
    /** The execution's blackboard writes as they happen (Server-Sent Events), until `signal` aborts. */
    events: (executionId: string, o?: Omit<O, "timeoutMs">): AsyncGenerator<BlackboardEvent> =>
      blackboardEvents(this.stream("execution_stream", { path: { execution_id: executionId } }, o)),
  };

  readonly scratchpad = {
    read: (executionId: string, o?: O): R<"scratchpad_read"> =>
      this.call("scratchpad_read", { path: { execution_id: executionId } }, o),
    get: (executionId: string, key: string, o?: O): R<"scratchpad_get"> =>
      this.call("scratchpad_get", { path: { execution_id: executionId, key } }, o),
    write: (executionId: string, key: string, body: B<"scratchpad_write">, o?: O): R<"scratchpad_write"> =>
      this.call("scratchpad_write", { path: { execution_id: executionId, key }, body }, o),
    delete: (executionId: string, key: string, o?: O): R<"scratchpad_delete"> =>
      this.call("scratchpad_delete", { path: { execution_id: executionId, key } }, o),
    clear: (executionId: string, o?: O): R<"scratchpad_clear"> =>
      this.call("scratchpad_clear", { path: { execution_id: executionId } }, o),
  };

  readonly executions = {
    close: (executionId: string, body: B<"execution_close">, o?: O): R<"execution_close"> =>
      this.call("execution_close", { path: { execution_id: executionId }, body }, o),
  };

  readonly sessions = {
    summary: (sessionId: string, query?: Q<"session_summary">, o?: O): R<"session_summary"> =>
      this.call("session_summary", { path: { session_id: sessionId }, query }, o),
    /** A conversation's messages in one call: appended to the log and made into memories (or a `job`). */
    addMessages: (sessionId: string, body: B<"messages_add">, o?: O): R<"messages_add"> =>
      this.call("messages_add", { path: { session_id: sessionId }, body }, o),
    /** The extraction job an `addMessages` call queued: its status, prompt, answer and decisions. */
    extraction: (jobId: string, o?: O): R<"extractions_get"> =>
      this.call("extractions_get", { path: { job_id: jobId } as never }, o),
    window: (sessionId: string, query?: Q<"window_read">, o?: O): R<"window_read"> =>
      this.call("window_read", { path: { session_id: sessionId }, query }, o),
    windowAppend: (sessionId: string, body: B<"window_append">, o?: O): R<"window_append"> =>
      this.call("window_append", { path: { session_id: sessionId }, body }, o),
  };

  readonly context = {
    /** Assemble the context of the current step within a token budget. */
    build: (body: B<"context_build">, o?: O): R<"context_build"> => this.call("context_build", { body }, o),
  };

  readonly skills = {
    /** The skills that match an intent, best first. */
    match: (query: Q<"skills_match">, o?: O): R<"skills_match"> => this.call("skills_match", { query }, o),
    get: (name: string, o?: O): R<"skills_get"> => this.call("skills_get", { path: { name } }, o),
    propose: (body: B<"skills_propose">, o?: O): R<"skills_propose"> => this.call("skills_propose", { body }, o),
    proposeVersion: (name: string, body: B<"skill_versions_propose">, o?: O): R<"skill_versions_propose"> =>
      this.call("skill_versions_propose", { path: { name }, body }, o),
    version: (name: string, number: number, o?: O): R<"skill_versions_get"> =>
      this.call("skill_versions_get", { path: { name, number } }, o),
    reportRun: (name: string, body: B<"skill_runs_report">, o?: O): R<"skill_runs_report"> =>
      this.call("skill_runs_report", { path: { name }, body }, o),
  };

  readonly tools = {
    list: (o?: O): R<"tools_list"> => this.call("tools_list", {}, o),
    get: (name: string, query?: Q<"tools_get">, o?: O): R<"tools_get"> =>
      this.call("tools_get", { path: { name }, query }, o),
    save: (body: B<"tools_save">, o?: O): R<"tools_save"> => this.call("tools_save", { body }, o),
  };

  readonly store = {
    get: (query: Q<"store_get">, o?: O): R<"store_get"> => this.call("store_get", { query }, o),
    put: (body: B<"store_put">, o?: O): R<"store_put"> => this.call("store_put", { body }, o),
    delete: (query: Q<"store_delete">, o?: O): R<"store_delete"> => this.call("store_delete", { query }, o),
    search: (body: B<"store_search">, o?: O): R<"store_search"> => this.call("store_search", { body }, o),
    namespaces: (query?: Q<"store_namespaces">, o?: O): R<"store_namespaces"> =>
      this.call("store_namespaces", { query }, o),
  };
}

async function* blackboardEvents(events: AsyncGenerator<ServerSentEvent>): AsyncGenerator<BlackboardEvent> {
  for await (const event of events) {
    if (event.event === "blackboard") yield { id: event.id, entry: JSON.parse(event.data) };
  }
}

/**
 * Which method of `EngramClient` calls each operation of the schema. `satisfies` makes the type
 * checker refuse a regenerated schema with an operation no method covers; the test suite checks
 * each entry against the live schema and the client.
 */
export const OPERATION_METHODS = {
  me: "me",
  memories_create: "memories.create",
  memories_list: "memories.list",
  memories_get: "memories.get",
  memories_versions: "memories.versions",
  memories_forget: "memories.forget",
  memories_search: "memories.search",
  events_append: "events.append",
  events_list: "events.list",
  facts_assert: "facts.assert",
  facts_retract: "facts.retract",
  entity_facts: "entities.facts",
  graph_path: "graph.path",
  contradictions_list: "contradictions.list",
  checkpoints_save: "checkpoints.save",
  checkpoints_list: "checkpoints.list",
  checkpoints_latest: "checkpoints.latest",
  checkpoints_get: "checkpoints.get",
  checkpoints_tuples: "checkpoints.tuples",
  checkpoints_tuples_all: "checkpoints.all",
  checkpoints_writes: "checkpoints.writes",
  checkpoints_delete: "checkpoints.delete",
  blackboard_read: "blackboard.read",
  blackboard_field: "blackboard.field",
  blackboard_write: "blackboard.write",
  execution_stream: "blackboard.events",
  scratchpad_read: "scratchpad.read",
  scratchpad_get: "scratchpad.get",
  scratchpad_write: "scratchpad.write",
  scratchpad_delete: "scratchpad.delete",
  scratchpad_clear: "scratchpad.clear",
  execution_close: "executions.close",
  session_summary: "sessions.summary",
  messages_add: "sessions.addMessages",
  extractions_get: "sessions.extraction",
  window_read: "sessions.window",
  window_append: "sessions.windowAppend",
  context_build: "context.build",
  skills_match: "skills.match",
  skills_get: "skills.get",
  skills_propose: "skills.propose",
  skill_versions_propose: "skills.proposeVersion",
  skill_versions_get: "skills.version",
  skill_runs_report: "skills.reportRun",
  tools_list: "tools.list",
  tools_get: "tools.get",
  tools_save: "tools.save",
  store_get: "store.get",
  store_put: "store.put",
  store_delete: "store.delete",
  store_search: "store.search",
  store_namespaces: "store.namespaces",
} as const satisfies Record<OperationId, string>;
