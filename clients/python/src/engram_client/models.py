"""Typed shapes of the API's requests and responses (``TypedDict``: the JSON as it is sent and
received, checked by a type checker, no copying). Field names and meanings are the OpenAPI
document's (``/api/v1/schema``); ``NotRequired`` marks what a request may leave out."""

from __future__ import annotations

from typing import Any, Generic, Literal, NotRequired, TypedDict, TypeVar

T = TypeVar("T")

Scope = Literal["private", "shared", "hierarchical"]
Layer = Literal["working", "window", "episodes", "semantic", "facts", "procedures"]


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
    scopes: list[str]


# --- episodic ---------------------------------------------------------------------------------


class EventIn(TypedDict):
    session_id: str
    kind: Literal["message", "tool_call", "tool_result", "decision", "observation"]
    occurred_at: str  # ISO 8601 with a timezone
    role: NotRequired[Literal["user", "assistant", "system", "tool"]]
    content: NotRequired[str]
    payload: NotRequired[dict[str, Any]]
    execution_id: NotRequired[str | None]


class Event(TypedDict):
    id: int
    seq: int
    session_id: str
    execution_id: str | None
    agent: str
    role: str
    kind: str
    content: str
    payload: dict[str, Any]
    occurred_at: str
    recorded_at: str
    hash: str


class EventBatch(TypedDict):
    count: int
    results: list[Event]


# --- semantic ---------------------------------------------------------------------------------


class VisibleTo(TypedDict):
    agents: list[str]
    roles: list[str]


class MemoryIn(TypedDict):
    content: str
    memory_type: NotRequired[str]
    scope: NotRequired[Scope]
    session_id: NotRequired[str | None]
    tags: NotRequired[list[str]]
    importance: NotRequired[float]
    confidence: NotRequired[float]
    metadata: NotRequired[dict[str, Any]]
    visible_to: NotRequired[VisibleTo]


class Memory(TypedDict):
    id: str
    content: str
    memory_type: str
    scope: Scope
    visible_to: VisibleTo
    agent: str
    session_id: str | None
    tags: list[str]
    importance: float
    confidence: float
    metadata: dict[str, Any]
    embedding_model: str
    created_at: str
    last_accessed_at: str
    access_count: int


class MemoryWritten(Memory):
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
    object: dict[str, Any]  # {"entity": "Acme", "type"?} or one of {"string"|"number"|"date"|"boolean": v}
    subject_type: NotRequired[str | None]
    confidence: NotRequired[float]
    valid_from: NotRequired[str]
    session_id: NotRequired[str | None]
    source_event_id: NotRequired[int | None]


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
    object: dict[str, Any]
    confidence: float
    status: Literal["active", "disputed", "superseded", "retracted"]
    disputed: bool
    valid_from: str
    valid_to: str | None
    recorded_at: str
    agent: str
    session_id: str | None
    source_event_id: int | None
    assertions: int


class FactWritten(TypedDict):
    outcome: Literal["created", "reinforced", "disputed"]
    fact: Fact
    contradiction_id: int | None
    projection: Literal["pending", "none"]


class EntityFacts(TypedDict):
    entity: Entity
    facts: list[Fact]
    graph: dict[str, Any] | None


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


# --- checkpoints ------------------------------------------------------------------------------


class CheckpointIn(TypedDict):
    step_index: int
    idempotency_key: str
    state: dict[str, Any]
    plan: NotRequired[list[Any]]
    schema_version: NotRequired[int]


class CheckpointSummary(TypedDict):
    id: int
    session_id: str
    step_index: int
    idempotency_key: str
    schema_version: int
    agent: str
    created_at: str


class Checkpoint(CheckpointSummary):
    state: dict[str, Any]
    plan: list[Any]


# --- procedural -------------------------------------------------------------------------------


class SkillMatch(TypedDict):
    name: str
    title: str
    description: str | None
    score: float
    components: dict[str, Any]
    version: dict[str, Any]


class SkillMatches(TypedDict):
    intent: str
    k: int
    count: int
    results: list[SkillMatch]


# --- context ----------------------------------------------------------------------------------


class Source(TypedDict):
    layer: str
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
