# mypy: disable-error-code="empty-body"
"""Every operation of the API, declared once: a signature, its route and a docstring. The
decorators (``_call.py``) turn each into a method of ``EngramClient`` (the answer) and of
``AsyncEngramClient`` (an awaitable, or an async iterator for lists and streams); a signature's
body is never run. A test walks the server's OpenAPI document and fails on an operation without a
method here (and on a method whose route the document lacks).

Arguments: a path template's names fill the path; ``idempotency_key`` is the header (a POST
without one gets a fresh key, the same on each retry; "" sends none); an argument left at its
default None is not sent; ``**filters: Unpack[...]`` takes the keys of that ``TypedDict``
(``engram.events(session_id="s1", limit=50)``). Errors: ``EngramError`` subclasses with the API's ``code`` and
``errors`` (``engram_client.errors``); ``TransportError`` when the server cannot be reached.
"""

from __future__ import annotations

from typing import Any, Literal, Unpack

from . import models as m
from ._call import listing, operation, stream


class Operations:
    """The API's operations, grouped as the OpenAPI document's tags."""

    # --- agents -------------------------------------------------------------------------------

    @operation("GET", "me")
    def me() -> m.Me:
        """The calling agent, its role, tenant, key id, scopes and the end user the key is bound to."""

    # --- episodic -----------------------------------------------------------------------------

    @operation("POST", "events", body="events")
    def events_append(events: list[m.EventIn], *, idempotency_key: str | None = None) -> m.EventBatch:
        """Append events to the hash-chained log (all or nothing, up to 500)."""

    @operation("POST", "events", body="event")
    def event_append(event: m.EventIn, *, idempotency_key: str | None = None) -> m.Event:
        """Append one event."""

    @listing("GET", "events")
    def events(**filters: Unpack[m.EventFilters]) -> m.Page[m.Event]:
        """Events oldest first, every page; ``q``: full text (web search syntax); ``since`` /
        ``until``: ISO 8601 bounds of ``occurred_at``; ``limit``: items per page."""

    @operation("POST", "sessions/{session_id}/messages")
    def add_messages(
        session_id: str,
        messages: list[m.MessageIn],
        *,
        data_subject: str | None = None,
        scope: Literal["private", "shared"] | None = None,
        tags: list[str] | None = None,
        extraction: Literal["auto", "turns", "llm"] | None = None,
        idempotency_key: str | None = None,
    ) -> m.MessagesAdded:
        """A conversation's messages in one call: appended to the session's log (all or nothing)
        and made into memories, one per user and assistant turn (``memories``), or, with a
        language model configured, by a queued ``job`` (poll ``extraction``)."""

    @operation("GET", "extractions/{job_id}")
    def extraction(job_id: str) -> m.ExtractionJob:
        """An extraction job of ``add_messages``: status, error, prompt, the model's answer and
        the decisions applied."""

    @operation("GET", "sessions/{session_id}/summary")
    def session_summary(session_id: str, *, level: int | None = None) -> m.SummaryTree:
        """The session's summary tree (``level`` 1: the leaves only)."""

    # --- semantic -----------------------------------------------------------------------------

    @operation("POST", "memories", body="memory")
    def memory_store(memory: m.MemoryIn, *, idempotency_key: str | None = None) -> m.MemoryWritten:
        """Store a memory: ``outcome`` created, accepted (async), deduplicated (a duplicate reinforced
        a memory) or updated (``supersedes``: the memory it replaced; state one with the input's
        ``supersedes``)."""

    @operation("POST", "memories", body="memories")
    def memories_store(memories: list[m.MemoryIn], *, idempotency_key: str | None = None) -> m.MemoryBatch:
        """Store a batch (up to 500, all or nothing, embedded in one model call); one result per
        item, in order, with ``deduplicated`` for those that reinforced a memory."""

    @listing("GET", "memories")
    def memories(**filters: Unpack[m.MemoryFilters]) -> m.Page[m.Memory]:
        """The memories the agent may see, newest first, every page (``tag``: each one given)."""

    @operation("POST", "memories/search")
    def memory_search(
        query: str,
        *,
        k: int = 10,
        filters: m.SearchFilters | None = None,
        mmr: m.MMR | None = None,
        weights: m.SearchWeights | None = None,
    ) -> m.SearchResult:
        """Hybrid recall (vector + full text), ``k`` hits scored as the tenant's weights say."""

    @operation("GET", "memories/{memory_id}")
    def memory_get(memory_id: str) -> m.MemoryDetail:
        """One memory, superseded ones too (``superseded_by``; ``supersedes``: what it replaced)."""

    @operation("GET", "memories/{memory_id}/versions")
    def memory_versions(memory_id: str) -> m.MemoryVersions:
        """The versions of a memory's update chain, oldest first, and the ``current`` one."""

    @operation("DELETE", "memories/{memory_id}")
    def memory_forget(memory_id: str, *, session_id: str | None = None) -> m.Forgotten:
        """Forget a memory (recorded in the trail, in ``session_id`` when given)."""

    # --- knowledge ----------------------------------------------------------------------------

    @operation("POST", "facts", body="fact")
    def fact_assert(fact: m.FactIn, *, idempotency_key: str | None = None) -> m.FactWritten:
        """Assert a fact: ``outcome`` created, reinforced or disputed (with a contradiction)."""

    @operation("POST", "facts", body="facts")
    def facts_assert(facts: list[m.FactIn], *, idempotency_key: str | None = None) -> m.FactBatch:
        """Assert a batch of facts (all or nothing)."""

    @operation("POST", "facts/{fact_id}/retract")
    def fact_retract(
        fact_id: int,
        *,
        reason: str | None = None,
        session_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> m.FactRetracted:
        """Retract a fact the agent asserted (it leaves default recall, kept for the trail)."""

    @operation("GET", "entities/{name}/facts")
    def entity_facts(name: str, **options: Unpack[m.EntityFactsOptions]) -> m.EntityFacts:
        """Facts about an entity (``as_of``: valid then; ``sessions``: asserted in the last N;
        ``depth`` 2-3 adds the graph around it, ``limit`` / ``cursor`` its pages)."""

    @operation("GET", "graph/path")
    def graph_path(source: str, target: str, *, max_depth: int | None = None) -> m.GraphPath:
        """The shortest chain of facts between two entities (up to ``max_depth`` hops)."""

    @listing("GET", "contradictions")
    def contradictions(
        *, status: Literal["open", "resolved", "dismissed"] | None = None, limit: int | None = None
    ) -> m.Page[m.Contradiction]:
        """Contradictions between facts, every page."""

    # --- working memory -----------------------------------------------------------------------

    @operation("GET", "executions/{execution_id}/blackboard")
    def blackboard(execution_id: str, *, agent: str | None = None) -> m.Blackboard:
        """The execution's shared blackboard (``agent``: only that agent's fields)."""

    @operation("GET", "executions/{execution_id}/blackboard/{agent}/{field}")
    def blackboard_field(execution_id: str, agent: str, field: str) -> m.BlackboardEntry:
        """One field of the blackboard, as ``agent`` wrote it."""

    @operation("PUT", "executions/{execution_id}/blackboard/{field}")
    def blackboard_write(
        execution_id: str,
        field: str,
        value: Any,
        *,
        expected_version: int | None = None,
        session_id: str | None = None,
    ) -> m.BlackboardEntry:
        """Write the agent's field; ``expected_version`` (0: not yet written) makes it a
        compare-and-set: a stale one is a ``Conflict`` whose ``body`` has ``current_version``."""

    @stream("executions/{execution_id}/stream")
    def blackboard_updates(execution_id: str) -> m.BlackboardEntry:
        """Each blackboard write of the execution as it happens (Server-Sent Events), until the
        caller stops iterating."""

    @operation("POST", "executions/{execution_id}/close")
    def execution_close(
        execution_id: str, *, session_id: str | None = None, idempotency_key: str | None = None
    ) -> m.Closed:
        """Close the execution: its blackboard is recorded as a decision and then refuses writes."""

    @operation("GET", "executions/{execution_id}/scratchpad")
    def scratchpad(execution_id: str) -> m.Scratchpad:
        """The agent's private scratchpad in the execution."""

    @operation("GET", "executions/{execution_id}/scratchpad/{key}")
    def scratchpad_get(execution_id: str, key: str) -> m.ScratchpadValue:
        """One scratchpad value."""

    @operation("PUT", "executions/{execution_id}/scratchpad/{key}")
    def scratchpad_write(
        execution_id: str, key: str, value: Any, *, session_id: str | None = None
    ) -> m.ScratchpadValue:
        """Write one scratchpad value."""

    @operation("DELETE", "executions/{execution_id}/scratchpad/{key}")
    def scratchpad_delete(execution_id: str, key: str) -> None:
        """Delete one scratchpad value."""

    @operation("DELETE", "executions/{execution_id}/scratchpad")
    def scratchpad_clear(execution_id: str) -> m.ScratchpadCleared:
        """Delete every value of the agent's scratchpad in the execution."""

    @operation("GET", "sessions/{session_id}/window")
    def window(session_id: str, *, last: int | None = None) -> m.Window:
        """The session's conversation window (the ``last`` turns)."""

    @operation("POST", "sessions/{session_id}/window")
    def window_append(
        session_id: str,
        role: m.Role,
        content: str,
        *,
        data_subject: str | None = None,
        idempotency_key: str | None = None,
    ) -> m.WindowAppended:
        """Append a turn to the conversation window (``data_subject``: the end user it is about)."""

    # --- checkpoints --------------------------------------------------------------------------

    @operation("POST", "sessions/{session_id}/checkpoints", body="checkpoint")
    def checkpoint_save(
        session_id: str, checkpoint: m.CheckpointIn, *, idempotency_key: str | None = None
    ) -> m.CheckpointSaved:
        """Save a checkpoint (its own ``idempotency_key`` makes a retry a replay)."""

    @operation("GET", "sessions/{session_id}/checkpoints/latest")
    def checkpoint_latest(session_id: str, *, checkpoint_ns: str | None = None) -> m.Checkpoint:
        """The agent's latest checkpoint in the session (in ``checkpoint_ns``, default the root)."""

    @operation("GET", "sessions/{session_id}/checkpoints/{step_index}")
    def checkpoint_get(session_id: str, step_index: int) -> m.Checkpoint:
        """The agent's checkpoint at ``step_index``."""

    @listing("GET", "sessions/{session_id}/checkpoints")
    def checkpoints(
        session_id: str,
        *,
        checkpoint_ns: str | None = None,
        data_subject: str | None = None,
        limit: int | None = None,
    ) -> m.Page[m.CheckpointSummary]:
        """The agent's checkpoints in the session, in step order, every page (``data_subject``: only
        that end user's)."""

    @listing("GET", "sessions/{session_id}/checkpoints/tuples")
    def checkpoint_tuples(session_id: str, **filters: Unpack[m.TupleFilters]) -> m.Page[m.CheckpointTuple]:
        """Checkpoints with their pending writes, newest first (LangGraph's ``list``);
        ``metadata``: a JSON object the checkpoints' metadata must hold."""

    @listing("GET", "checkpoints")
    def checkpoint_tuples_all(**filters: Unpack[m.TupleAllFilters]) -> m.Page[m.CheckpointTuple]:
        """The agent's checkpoints in every session in full with their pending writes, newest first,
        every page (LangGraph's list without a thread). ``metadata``: a JSON object the checkpoints'
        metadata must hold; ``before``: ``{"session_id", "key"}`` as JSON, only those saved before it."""

    @operation("POST", "sessions/{session_id}/checkpoints/writes")
    def checkpoint_writes(
        session_id: str,
        key: str,
        task_id: str,
        writes: list[m.WriteIn],
        *,
        checkpoint_ns: str | None = None,
        task_path: str | None = None,
        idempotency_key: str | None = None,
    ) -> m.StoredWrites:
        """Store a task's pending writes against checkpoint ``key`` (LangGraph's ``put_writes``)."""

    @operation("DELETE", "sessions/{session_id}/checkpoints")
    def checkpoints_delete(session_id: str, *, agent: str | None = None) -> m.CheckpointsDeleted:
        """Delete the agent's checkpoints in the session (another ``agent``'s: curate scope)."""

    # --- procedural ---------------------------------------------------------------------------

    @operation("GET", "tools")
    def tools() -> m.Page[m.Tool]:
        """The tenant's tools (their latest versions)."""

    @operation("POST", "tools")
    def tool_save(
        name: str,
        input_schema: dict[str, Any],
        output_schema: dict[str, Any],
        *,
        description: str | None = None,
        idempotency_key: str | None = None,
    ) -> m.ToolSaved:
        """Save a tool contract (JSON Schema 2020-12); a changed contract is a new version."""

    @operation("GET", "tools/{name}")
    def tool_get(name: str, *, version: int | None = None) -> m.ToolDetail:
        """A tool (its latest version, or ``version``)."""

    @operation("GET", "skills")
    def skills_match(intent: str, *, k: int = 5, success_weight: float | None = None) -> m.SkillMatches:
        """Published skills for an intent, best first."""

    @operation("POST", "skills", body="proposal")
    def skill_propose(proposal: m.SkillIn, *, idempotency_key: str | None = None) -> m.Skill:
        """Propose a new skill (a draft version 1, validated against the tools)."""

    @operation("GET", "skills/{name}")
    def skill_get(name: str) -> m.Skill:
        """A skill with its published version."""

    @operation("POST", "skills/{name}/versions", body="proposal")
    def skill_version_propose(
        name: str, proposal: m.VersionIn, *, idempotency_key: str | None = None
    ) -> m.Skill:
        """Propose a new draft version of a skill."""

    @operation("GET", "skills/{name}/versions/{number}")
    def skill_version_get(name: str, number: int) -> m.Skill:
        """A skill with version ``number``."""

    @operation("POST", "skills/{name}/runs", body="run")
    def skill_run_report(name: str, run: m.RunIn, *, idempotency_key: str | None = None) -> m.Run:
        """Report a run of a skill version (its success rate ranks matches)."""

    # --- store --------------------------------------------------------------------------------

    @operation("POST", "store/items")
    def store_put(
        namespace: list[str],
        key: str,
        value: dict[str, Any],
        *,
        index: bool | list[str] | None = None,
        ttl: float | None = None,
        data_subject: str | None = None,
        idempotency_key: str | None = None,
    ) -> m.StoreItemWritten:
        """Write an item of the tenant's store (``ttl`` in minutes; ``index``: what to embed)."""

    @operation("GET", "store/items")
    def store_get(namespace: str, key: str, *, refresh_ttl: bool | None = None) -> m.StoreItem:
        """One item (``namespace``: its labels joined by "."); a missing one is ``NotFound``."""

    @operation("DELETE", "store/items")
    def store_delete(namespace: str, key: str) -> m.StoreItemDeleted:
        """Delete an item (``namespace``: its labels joined by "."); a missing one is no error."""

    @operation("POST", "store/search")
    def store_search(**search: Unpack[m.StoreSearchIn]) -> m.StoreSearchResult:
        """Items under ``namespace_prefix``, matching ``filter`` (JSON containment), ranked by
        ``query``."""

    @operation("GET", "store/namespaces")
    def store_namespaces(**options: Unpack[m.NamespaceFilters]) -> m.StoreNamespaces:
        """The store's namespaces (``prefix`` / ``suffix`` dotted, "*" any label)."""

    # --- context ------------------------------------------------------------------------------

    @operation("POST", "context", body="request")
    def context_build(request: m.ContextIn, *, idempotency_key: str | None = None) -> m.Context:
        """The step's context within a token budget (see the server's README, "Context assembly")."""
