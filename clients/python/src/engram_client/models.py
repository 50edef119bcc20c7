"""Typed shapes of the API's requests and responses (``TypedDict``: the JSON as it is sent and
received, checked by a type checker, no copying). Field names and meanings are the OpenAPI
document's (``/api/v1/schema``); ``NotRequired`` marks what a request may leave out. A test holds
the members of every response shape equal to its schema's properties."""

# no ``from __future__ import annotations``: TypedDict reads NotRequired from evaluated annotations
from typing import Any, Generic, Literal, NotRequired, TypedDict, TypeVar

T = TypeVar("T")

Scope = Literal["private", "shared", "hierarchical"]
MemoryType = Literal["fact", "preference", "observation", "experience", "instruction", "summary"]
Layer = Literal["working", "window", "episodes", "semantic", "facts", "procedures"]
Role = Literal["user", "assistant", "system", "tool"]
EventKind = Literal["message", "tool_call", "tool_result", "decision", "observation"]
Projection = Literal["pending", "none"]


class Page(TypedDict, Generic[T]):
    """One page of a list: ``next`` / ``previous`` are URLs (or null)."""

    results: list[T]
    next: str | None
    previous: str | None


class Me(TypedDict):
    agent: str
    role: str | None
    tenant: str
    key_id: str
    scopes: list[Literal["read", "write", "curate"]]
    data_subject: str | None  # the end user the key is bound to (None: unbound)


# --- episodic ---------------------------------------------------------------------------------


class EventIn(TypedDict):
    session_id: str
    kind: EventKind
    occurred_at: str  # ISO 8601 with a timezone
    role: NotRequired[Role]
    content: NotRequired[str]
    payload: NotRequired[dict[str, Any]]
    execution_id: NotRequired[str | None]
    data_subject: NotRequired[str]


class Event(TypedDict):
    id: int
    seq: int
    session_id: str
    execution_id: str | None
    agent: str
    role: str
    kind: str
    content: str
    payload: Any
    occurred_at: str
    recorded_at: str
    prev_hash: str
    hash: str
    data_subject: str | None
    redacted: bool


class EventBatch(TypedDict):
    count: int
    results: list[Event]


class MessageIn(TypedDict):
    """A message of a conversation (``add_messages``)."""

    role: Role
    content: str
    name: NotRequired[str]  # who spoke (default: the role)
    occurred_at: NotRequired[str]  # ISO 8601 with a timezone (default: now)
    metadata: NotRequired[dict[str, Any]]  # kept in the message's event payload


class FormedMemory(TypedDict):
    message: int  # the index of the message in the request
    id: str
    outcome: Literal["created", "deduplicated", "updated"]
    supersedes: str | None  # the memory this one replaced (an update)


class ExtractionJob(TypedDict):
    id: str
    status: Literal["queued", "running", "done", "failed"]
    session_id: str
    data_subject: str | None
    event_ids: list[int]
    model: str
    prompt: str
    answer: str
    decisions: list[dict[str, Any]]
    error: str
    attempts: int
    created_at: str
    finished_at: str | None


class MessagesAdded(TypedDict):
    session_id: str
    data_subject: str | None
    events: list[Event]
    memories: list[FormedMemory]
    job: ExtractionJob | None


class SummaryNode(TypedDict):
    id: int
    level: int
    position: int
    first_seq: int
    last_seq: int
    event_count: int
    child_count: int
    last_event_hash: str
    method: Literal["extractive", "abstractive"]
    content: str
    memory_id: str | None
    updated_at: str


class SummaryTree(TypedDict):
    session_id: str
    depth: int
    results: list[SummaryNode]


# --- semantic ---------------------------------------------------------------------------------


class VisibleTo(TypedDict):
    agents: NotRequired[list[str]]
    roles: NotRequired[list[str]]


class FactObject(TypedDict, total=False):
    """A fact's object: ``{"entity", "type"?}`` (``id`` in answers) or one of ``string`` /
    ``number`` / ``date`` / ``boolean``."""

    entity: str
    type: str | None
    id: int
    string: str
    number: float
    date: str
    boolean: bool


class FactHint(TypedDict):
    subject: str
    subject_type: NotRequired[str | None]
    predicate: str
    object: FactObject


class MemoryIn(TypedDict):
    content: str
    memory_type: NotRequired[MemoryType]
    scope: NotRequired[Scope]
    session_id: NotRequired[str | None]
    tags: NotRequired[list[str]]
    importance: NotRequired[float]
    confidence: NotRequired[float]
    metadata: NotRequired[dict[str, Any]]
    embedding: NotRequired[list[float]]
    embedding_model: NotRequired[str]
    visible_to: NotRequired[VisibleTo]
    fact: NotRequired[FactHint | None]
    source_event_id: NotRequired[int | None]
    write: NotRequired[Literal["sync", "async"]]
    data_subject: NotRequired[str]
    supersedes: NotRequired[str | None]


class Memory(TypedDict):
    id: str
    content: str
    memory_type: MemoryType
    scope: Scope
    visible_to: VisibleTo
    agent: str
    session_id: str | None
    data_subject: str | None
    tags: list[str]
    importance: float
    confidence: float
    metadata: Any
    embedding_model: str
    created_at: str
    last_accessed_at: str
    access_count: int
    stability_hours: float
    recall_probability: float
    archived_at: str | None
    pending: bool
    fact: FactHint | None
    source_event_id: int | None
    superseded_by: str | None
    superseded_at: str | None


class MemoryDetail(Memory):
    supersedes: str | None


class MemoryVersions(TypedDict):
    id: str
    current: str | None
    count: int
    results: list[Memory]


class MemoryWritten(Memory):
    outcome: Literal["created", "accepted", "deduplicated", "updated"]
    supersedes: str | None
    deduplicated: bool
    duplicate_of: NotRequired[Literal["exact", "near"]]
    similarity: NotRequired[float]


class MemoryBatch(TypedDict):
    count: int
    results: list[MemoryWritten]


class ScoreComponents(TypedDict):
    relevance: float
    similarity: float
    text_relevance: float
    recency: float
    importance: float


class SearchHit(TypedDict):
    memory: Memory
    score: float
    components: ScoreComponents


class SearchResult(TypedDict):
    query: str
    k: int
    count: int
    results: list[SearchHit]


class Forgotten(TypedDict):
    id: str
    forgotten_at: str
    event_id: int
    event_seq: int


# --- knowledge --------------------------------------------------------------------------------


class FactIn(TypedDict):
    subject: str
    predicate: str
    object: FactObject
    subject_type: NotRequired[str | None]
    confidence: NotRequired[float]
    valid_from: NotRequired[str]
    session_id: NotRequired[str | None]
    source_event_id: NotRequired[int | None]
    data_subject: NotRequired[str | None]


class Entity(TypedDict):
    id: int
    name: str
    type: str | None


class Fact(TypedDict):
    id: int
    subject: str
    subject_type: str | None
    subject_id: int
    predicate: str
    object: FactObject
    confidence: float
    status: Literal["active", "disputed", "superseded", "retracted"]
    disputed: bool
    valid_from: str
    valid_to: str | None
    recorded_at: str
    agent: str
    session_id: str | None
    data_subject: str | None
    source_event_id: int | None
    assertions: int


class FactRetracted(Fact):
    projection: Projection


class FactAssertion(TypedDict):
    outcome: Literal["created", "reinforced", "disputed"]
    fact: Fact
    contradiction_id: int | None


class FactWritten(FactAssertion):
    projection: Projection


class FactBatch(TypedDict):
    count: int
    projection: Projection
    results: list[FactAssertion]


class EntityDistance(TypedDict):
    id: int
    name: str | None
    distance: int


class GraphSlice(TypedDict):
    backend: str
    depth: int
    entities: list[EntityDistance]
    facts: list[Fact]
    limit: int
    fanout: int
    truncated: bool
    next: str | None


class EntityFacts(TypedDict):
    entity: Entity
    facts: list[Fact]
    facts_limit: int
    facts_next: str | None
    graph: GraphSlice | None


class GraphPath(TypedDict):
    backend: str
    hops: int
    entities: list[Entity]
    facts: list[Fact]


class Contradiction(TypedDict):
    id: int
    status: Literal["open", "resolved", "dismissed"]
    resolution: str | None
    reviewer: str | None
    note: str | None
    created_at: str
    resolved_at: str | None
    existing_fact: Fact
    new_fact: Fact


# --- working memory ---------------------------------------------------------------------------


class BlackboardEntry(TypedDict):
    field: str  # <agent>:<name>
    agent: str
    version: int
    updated_at: str
    value: Any


class Blackboard(TypedDict):
    execution_id: str
    results: list[BlackboardEntry]


class BlackboardSummary(BlackboardEntry):
    value_truncated: str | None


class Closed(TypedDict):
    execution_id: str
    closed: bool
    event_id: int
    event_seq: int
    blackboard: list[BlackboardSummary]


class Scratchpad(TypedDict):
    execution_id: str
    values: dict[str, Any]


class ScratchpadValue(TypedDict):
    execution_id: str
    key: str
    value: Any


class ScratchpadCleared(TypedDict):
    execution_id: str
    deleted: int


class Turn(TypedDict):
    role: Role
    content: str
    agent: str
    at: str


class Window(TypedDict):
    session_id: str
    results: list[Turn]


class WindowAppended(TypedDict):
    session_id: str
    length: int


# --- checkpoints ------------------------------------------------------------------------------


class Serialized(TypedDict):
    """A value as a serializer wrote it: its ``type`` tag and the bytes as base64 ``data``."""

    type: str
    data: str


class Channel(TypedDict):
    """A channel of a checkpoint: its version, and the value at that version (sent only when the
    version is new; read back when one is stored)."""

    version: str
    value: NotRequired[Serialized]


class CheckpointIn(TypedDict):
    idempotency_key: str
    step_index: NotRequired[int]
    state: NotRequired[dict[str, Any]]
    plan: NotRequired[list[Any]]
    schema_version: NotRequired[int]
    data_subject: NotRequired[str]
    checkpoint_ns: NotRequired[str]
    parent_key: NotRequired[str]
    metadata: NotRequired[dict[str, Any]]
    serialized: NotRequired[Serialized | None]
    channels: NotRequired[dict[str, Channel]]


class CheckpointSummary(TypedDict):
    id: int
    session_id: str
    step_index: int
    idempotency_key: str
    schema_version: int
    agent: str
    created_at: str
    checkpoint_ns: str
    parent_key: str | None
    metadata: dict[str, Any]


class Checkpoint(CheckpointSummary):
    state: dict[str, Any]
    plan: list[Any]
    serialized: Serialized | None
    channels: NotRequired[dict[str, Channel]]  # absent for a checkpoint saved whole


class CheckpointSaved(Checkpoint):
    replayed: bool


class PendingWrite(TypedDict):
    task_id: str
    task_path: str
    channel: str
    idx: int
    value: Serialized


class CheckpointTuple(Checkpoint):
    pending_writes: list[PendingWrite]


class WriteIn(TypedDict):
    channel: str
    value: Serialized


class StoredWrite(TypedDict):
    task_id: str
    channel: str
    idx: int
    created: bool


class StoredWrites(TypedDict):
    count: int
    results: list[StoredWrite]


class CheckpointsDeleted(TypedDict):
    agent: str
    checkpoints: int
    writes: int
    blobs: int
    namespaces: list[str]
    event_id: int | None
    event_seq: int | None


# --- procedural -------------------------------------------------------------------------------


class Step(TypedDict):
    """One step of a skill: ``tool`` called with ``params`` (see the server's README, "Skills")."""

    id: str
    tool: str
    params: NotRequired[dict[str, Any]]
    when: NotRequired[str]
    on_error: NotRequired[str]
    retries: NotRequired[int]
    output_as: NotRequired[str]


class SkillVersion(TypedDict):
    number: int
    status: Literal["draft", "published", "retired"]
    steps: list[Step]
    input_schema: dict[str, Any]
    tool_versions: dict[str, int]
    change_note: str | None
    author: str
    proposed_by: NotRequired[str | None]
    based_on: int | None
    created_at: str
    published_at: str | None
    runs: int
    success_rate: float | None


class Skill(TypedDict):
    name: str
    title: str
    description: str | None
    intents: list[str]
    tags: list[str]
    owner: str | None
    version: SkillVersion


class MatchComponents(TypedDict):
    relevance: float
    similarity: float
    text_relevance: float
    success_prior: float


class SkillMatch(Skill):
    score: float
    components: MatchComponents


class SkillMatches(TypedDict):
    intent: str
    k: int
    count: int
    results: list[SkillMatch]


class Run(TypedDict):
    id: int
    skill: str
    version: int
    success: bool
    failed_step: str | None
    duration_ms: int | None
    session_id: str | None
    reported_at: str
    version_runs: int
    version_success_rate: float | None


class Tool(TypedDict):
    name: str
    version: int
    description: str | None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    author: str
    created_at: str


class ToolSaved(Tool):
    created: bool


class ToolDetail(Tool):
    versions: list[int]


# --- store ------------------------------------------------------------------------------------


class StoreItem(TypedDict):
    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: str
    updated_at: str
    expires_at: str | None
    ttl: float | None  # minutes
    indexed: list[str]
    data_subject: str | None
    created_by: str
    updated_by: str


class StoreItemWritten(StoreItem):
    created: bool
    event_id: int


class StoreItemDeleted(TypedDict):
    deleted: bool
    event_id: int | None


class StoreSearchItem(StoreItem):
    score: float | None


class StoreSearchResult(TypedDict):
    count: int
    results: list[StoreSearchItem]


class StoreNamespaces(TypedDict):
    count: int
    results: list[list[str]]


# --- context ----------------------------------------------------------------------------------


class Source(TypedDict):
    layer: Literal["scratchpad", "blackboard", "window", "episodic", "semantic", "knowledge", "procedural"]
    id: str


class ContextItem(TypedDict):
    text: str
    tokens: int
    relevance: float
    value: float
    sources: list[Source]


class ContextSection(TypedDict):
    layer: Layer
    title: str
    tokens: int
    items: list[ContextItem]


class ContextIn(TypedDict):
    session_id: str
    query: str
    budget: int
    execution_id: NotRequired[str | None]
    weights: NotRequired[dict[Layer, float]]
    data_subject: NotRequired[str]  # assemble for this end user


class Context(TypedDict):
    session_id: str
    execution_id: str | None
    query: str
    budget: int
    tokenizer: str
    tokens_used: int
    sections: list[ContextSection]
    text: str
    history_turns: int
    turn_tokens_mean: float
    full_history_tokens: int
    cumulative_full_history_tokens: int
    saved_tokens: int
    candidates: int
    duplicates_merged: int
    dropped: int
    weights: dict[str, float]


# --- recall options ---------------------------------------------------------------------------


class Range(TypedDict, total=False):
    """Bounds of a value (ISO 8601 for dates)."""

    gt: Any
    gte: Any
    lt: Any
    lte: Any


class SearchFilters(TypedDict, total=False):
    agent: str
    scope: Scope
    memory_type: MemoryType
    session_id: str
    tags_any: list[str]
    tags_all: list[str]
    min_confidence: float
    created_at: Range
    importance: Range
    include_archived: bool
    data_subject: str
    include_superseded: bool
    as_of: str


class SearchWeights(TypedDict, total=False):
    similarity: float
    recency: float
    importance: float


MMR = TypedDict("MMR", {"lambda": float})
"""Maximal marginal relevance: ``{"lambda": 0..1}`` (1: relevance only)."""


# --- query filters and request bodies passed as keyword arguments ----------------------------


class EventFilters(TypedDict, total=False):
    session_id: str
    execution_id: str
    agent: str
    kind: EventKind | list[EventKind]
    q: str
    since: str
    until: str
    data_subject: str
    limit: int


class MemoryFilters(TypedDict, total=False):
    agent: str
    scope: Scope
    memory_type: MemoryType
    session_id: str
    tag: str | list[str]
    min_confidence: float
    since: str
    until: str
    include_archived: bool
    data_subject: str
    include_superseded: bool
    as_of: str
    limit: int


class EntityFactsOptions(TypedDict, total=False):
    as_of: str
    agent: str
    sessions: int
    depth: int
    limit: int
    cursor: str
    facts_limit: int
    facts_cursor: str
    data_subject: str


class TupleFilters(TypedDict, total=False):
    checkpoint_ns: str
    key: str
    before: str
    metadata: str  # a JSON object
    limit: int


class TupleAllFilters(TypedDict, total=False):
    checkpoint_ns: str
    before: str  # a JSON object: {"session_id": ..., "key": ...}
    metadata: str  # a JSON object
    limit: int


class NamespaceFilters(TypedDict, total=False):
    prefix: str
    suffix: str
    max_depth: int
    limit: int
    offset: int
    data_subject: str


class StoreSearchIn(TypedDict, total=False):
    namespace_prefix: list[str]
    query: str | None
    filter: dict[str, Any]
    limit: int
    offset: int
    refresh_ttl: bool
    data_subject: str


class SkillIn(TypedDict):
    name: str
    title: str
    input_schema: dict[str, Any]
    steps: list[Step]
    description: NotRequired[str]
    intents: NotRequired[list[str]]
    tags: NotRequired[list[str]]
    owner: NotRequired[str]
    change_note: NotRequired[str]
    session_id: NotRequired[str]


class VersionIn(TypedDict):
    steps: list[Step]
    input_schema: NotRequired[dict[str, Any]]
    change_note: NotRequired[str]
    based_on: NotRequired[int]
    session_id: NotRequired[str]


class RunIn(TypedDict):
    version: int
    success: bool
    failed_step: NotRequired[str]
    duration_ms: NotRequired[int]
    error: NotRequired[str]
    session_id: NotRequired[str]
