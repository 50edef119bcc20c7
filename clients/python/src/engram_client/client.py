"""``EngramClient`` (sync) and ``AsyncEngramClient`` (asyncio) over httpx.

Both send ``Authorization: Bearer <api key>``, turn error answers into ``EngramError`` subclasses
(with the API's ``code`` and ``errors``), and retry what is safe to retry: a connection error or a
502/503/504, up to ``RetryPolicy.attempts`` times with exponential backoff. Every POST carries an
``Idempotency-Key`` (one per call, the same on each retry), so a retried write is applied once:
the server replays its first answer. List operations come as iterators over the cursor pages.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

import httpx

from . import models as m
from .errors import TransportError, error_for

RETRY_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all; the n-th retry waits ``backoff * 2**(n-1)`` seconds."""

    attempts: int = 3
    backoff: float = 0.2


@dataclass(frozen=True)
class Call:
    """One API call: ``path`` under ``/api/v1/`` (or a full URL from a page's ``next``)."""

    method: str
    path: str
    json: Any = None
    params: Mapping[str, Any] | None = None

    def headers(self, idempotency_key: str | None) -> dict[str, str]:
        return {"Idempotency-Key": idempotency_key} if idempotency_key else {}


def _segment(value: str) -> str:
    return quote(str(value), safe="")


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _result(response: httpx.Response) -> Any:
    body: Any = None
    if response.content:
        try:
            body = response.json()
        except ValueError:
            body = response.text
    if response.status_code >= 400:
        raise error_for(response.status_code, body)
    return body


class _Operations:
    """The API's operations as ``Call`` values (shared by the sync and async clients)."""

    @staticmethod
    def events_append(events: list[m.EventIn]) -> Call:
        return Call("POST", "events", json=events)

    @staticmethod
    def events(**filters: Any) -> Call:
        return Call("GET", "events", params=_params(**filters))

    @staticmethod
    def memory_store(memory: m.MemoryIn) -> Call:
        return Call("POST", "memories", json=memory)

    @staticmethod
    def memories_store(memories: list[m.MemoryIn]) -> Call:
        return Call("POST", "memories", json=memories)

    @staticmethod
    def memories(**filters: Any) -> Call:
        return Call("GET", "memories", params=_params(**filters))

    @staticmethod
    def memory_search(query: str, k: int, **options: Any) -> Call:
        return Call("POST", "memories/search", json={"query": query, "k": k, **_params(**options)})

    @staticmethod
    def context_build(request: m.ContextIn) -> Call:
        return Call("POST", "context", json=request)


class EngramClient:
    """A synchronous client of one Engram server as one agent (its API key).

    ``base_url`` is the server (``http://demo.localhost:8000``); ``transport`` is httpx's (tests,
    proxies). Use as a context manager, or call ``close()``.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(
            base_url=base_url.rstrip("/") + "/api/v1/",
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> EngramClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- the machinery ---------------------------------------------------------------------

    def send(self, call: Call, *, idempotency_key: str | None = None) -> Any:
        """Send ``call`` (with retries, see the module docstring) and return its JSON body.
        Raises ``EngramError`` subclasses for error answers and ``TransportError`` when the
        server cannot be reached."""
        if call.method == "POST" and idempotency_key is None:
            idempotency_key = str(uuid.uuid4())
        for attempt in range(1, self.retry.attempts + 1):
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    json=call.json,
                    params=call.params,
                    headers=call.headers(idempotency_key),
                )
            except httpx.TransportError as exc:
                if attempt == self.retry.attempts:
                    raise TransportError(str(exc)) from exc
            else:
                if response.status_code not in RETRY_STATUSES or attempt == self.retry.attempts:
                    return _result(response)
            time.sleep(self.retry.backoff * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    def pages(self, call: Call) -> Iterator[m.Page[Any]]:
        """Every page of a list operation, following ``next``."""
        page: m.Page[Any] = self.send(call)
        yield page
        while page["next"]:
            page = self.send(Call("GET", page["next"]))
            yield page

    def items(self, call: Call) -> Iterator[Any]:
        """Every item of a list operation, page after page."""
        for page in self.pages(call):
            yield from page["results"]

    # --- operations ------------------------------------------------------------------------

    def me(self) -> m.Me:
        return cast(m.Me, self.send(Call("GET", "me")))

    def events_append(self, events: list[m.EventIn], *, idempotency_key: str | None = None) -> m.EventBatch:
        """Append events (all or nothing)."""
        return cast(
            m.EventBatch, self.send(_Operations.events_append(events), idempotency_key=idempotency_key)
        )

    def events(self, **filters: Any) -> Iterator[m.Event]:
        """Events oldest first; filters as the API's (``session_id``, ``kind``, ``since``, ``q``...)."""
        return self.items(_Operations.events(**filters))

    def memory_store(self, memory: m.MemoryIn, *, idempotency_key: str | None = None) -> m.MemoryWritten:
        return cast(
            m.MemoryWritten, self.send(_Operations.memory_store(memory), idempotency_key=idempotency_key)
        )

    def memories_store(
        self, memories: list[m.MemoryIn], *, idempotency_key: str | None = None
    ) -> m.MemoryBatch:
        """Store a batch (up to 500, all or nothing, embedded in one model call); one result per
        item, in order, with ``deduplicated`` for those that reinforced a memory."""
        return cast(
            m.MemoryBatch, self.send(_Operations.memories_store(memories), idempotency_key=idempotency_key)
        )

    def memories(self, **filters: Any) -> Iterator[m.Memory]:
        """The memories the agent may see, newest first."""
        return self.items(_Operations.memories(**filters))

    def memory_search(self, query: str, *, k: int = 10, **options: Any) -> m.SearchResult:
        """Hybrid recall; ``options``: ``filters``, ``mmr``, ``weights`` as the API's."""
        return cast(m.SearchResult, self.send(_Operations.memory_search(query, k, **options)))

    def memory_get(self, memory_id: str) -> m.Memory:
        return cast(m.Memory, self.send(Call("GET", f"memories/{_segment(memory_id)}")))

    def memory_forget(self, memory_id: str) -> m.Forgotten:
        return cast(m.Forgotten, self.send(Call("DELETE", f"memories/{_segment(memory_id)}")))

    def fact_assert(self, fact: m.FactIn, *, idempotency_key: str | None = None) -> m.FactWritten:
        return cast(
            m.FactWritten, self.send(Call("POST", "facts", json=fact), idempotency_key=idempotency_key)
        )

    def entity_facts(self, name: str, **options: Any) -> m.EntityFacts:
        """Facts about an entity; ``options``: ``as_of``, ``agent``, ``sessions``, ``depth``."""
        return cast(
            m.EntityFacts,
            self.send(Call("GET", f"entities/{_segment(name)}/facts", params=_params(**options))),
        )

    def blackboard(self, execution_id: str, *, agent: str | None = None) -> m.Blackboard:
        path = f"executions/{_segment(execution_id)}/blackboard"
        return cast(m.Blackboard, self.send(Call("GET", path, params=_params(agent=agent))))

    def blackboard_write(
        self, execution_id: str, field: str, value: Any, *, expected_version: int | None = None
    ) -> m.BlackboardEntry:
        body: dict[str, Any] = {"value": value}
        if expected_version is not None:
            body["expected_version"] = expected_version
        path = f"executions/{_segment(execution_id)}/blackboard/{_segment(field)}"
        return cast(m.BlackboardEntry, self.send(Call("PUT", path, json=body)))

    def checkpoint_save(self, session_id: str, checkpoint: m.CheckpointIn) -> m.Checkpoint:
        """Save a checkpoint (its ``idempotency_key`` makes a retry a replay)."""
        path = f"sessions/{_segment(session_id)}/checkpoints"
        return cast(m.Checkpoint, self.send(Call("POST", path, json=checkpoint)))

    def checkpoint_latest(self, session_id: str) -> m.Checkpoint:
        return cast(
            m.Checkpoint, self.send(Call("GET", f"sessions/{_segment(session_id)}/checkpoints/latest"))
        )

    def checkpoint_get(self, session_id: str, step_index: int) -> m.Checkpoint:
        path = f"sessions/{_segment(session_id)}/checkpoints/{int(step_index)}"
        return cast(m.Checkpoint, self.send(Call("GET", path)))

    def checkpoints(self, session_id: str, *, limit: int | None = None) -> Iterator[m.CheckpointSummary]:
        """The agent's checkpoints in the session, in step order."""
        return self.items(
            Call("GET", f"sessions/{_segment(session_id)}/checkpoints", params=_params(limit=limit))
        )

    def skills_match(self, intent: str, *, k: int = 5) -> m.SkillMatches:
        return cast(m.SkillMatches, self.send(Call("GET", "skills", params={"intent": intent, "k": k})))

    def context_build(self, request: m.ContextIn) -> m.Context:
        """The step's context within a token budget (see the server's README, "Context assembly")."""
        return cast(m.Context, self.send(_Operations.context_build(request)))


class AsyncEngramClient:
    """The asyncio twin of ``EngramClient`` (same operations, awaited; lists as async iterators)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + "/api/v1/",
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    async def __aenter__(self) -> AsyncEngramClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, call: Call, *, idempotency_key: str | None = None) -> Any:
        """See ``EngramClient.send``."""
        if call.method == "POST" and idempotency_key is None:
            idempotency_key = str(uuid.uuid4())
        for attempt in range(1, self.retry.attempts + 1):
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    json=call.json,
                    params=call.params,
                    headers=call.headers(idempotency_key),
                )
            except httpx.TransportError as exc:
                if attempt == self.retry.attempts:
                    raise TransportError(str(exc)) from exc
            else:
                if response.status_code not in RETRY_STATUSES or attempt == self.retry.attempts:
                    return _result(response)
            await asyncio.sleep(self.retry.backoff * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    async def items(self, call: Call) -> AsyncIterator[Any]:
        """Every item of a list operation, page after page."""
        page: m.Page[Any] = await self.send(call)
        while True:
            for item in page["results"]:
                yield item
            if not page["next"]:
                return
            page = await self.send(Call("GET", page["next"]))

    async def me(self) -> m.Me:
        return cast(m.Me, await self.send(Call("GET", "me")))

    async def events_append(
        self, events: list[m.EventIn], *, idempotency_key: str | None = None
    ) -> m.EventBatch:
        return cast(
            m.EventBatch, await self.send(_Operations.events_append(events), idempotency_key=idempotency_key)
        )

    def events(self, **filters: Any) -> AsyncIterator[m.Event]:
        return self.items(_Operations.events(**filters))

    async def memory_store(
        self, memory: m.MemoryIn, *, idempotency_key: str | None = None
    ) -> m.MemoryWritten:
        return cast(
            m.MemoryWritten,
            await self.send(_Operations.memory_store(memory), idempotency_key=idempotency_key),
        )

    async def memories_store(
        self, memories: list[m.MemoryIn], *, idempotency_key: str | None = None
    ) -> m.MemoryBatch:
        return cast(
            m.MemoryBatch,
            await self.send(_Operations.memories_store(memories), idempotency_key=idempotency_key),
        )

    def memories(self, **filters: Any) -> AsyncIterator[m.Memory]:
        return self.items(_Operations.memories(**filters))

    async def memory_search(self, query: str, *, k: int = 10, **options: Any) -> m.SearchResult:
        return cast(m.SearchResult, await self.send(_Operations.memory_search(query, k, **options)))

    async def memory_forget(self, memory_id: str) -> m.Forgotten:
        return cast(m.Forgotten, await self.send(Call("DELETE", f"memories/{_segment(memory_id)}")))

    async def fact_assert(self, fact: m.FactIn, *, idempotency_key: str | None = None) -> m.FactWritten:
        return cast(
            m.FactWritten, await self.send(Call("POST", "facts", json=fact), idempotency_key=idempotency_key)
        )

    async def entity_facts(self, name: str, **options: Any) -> m.EntityFacts:
        path = f"entities/{_segment(name)}/facts"
        return cast(m.EntityFacts, await self.send(Call("GET", path, params=_params(**options))))

    async def checkpoint_save(self, session_id: str, checkpoint: m.CheckpointIn) -> m.Checkpoint:
        path = f"sessions/{_segment(session_id)}/checkpoints"
        return cast(m.Checkpoint, await self.send(Call("POST", path, json=checkpoint)))

    async def checkpoint_latest(self, session_id: str) -> m.Checkpoint:
        path = f"sessions/{_segment(session_id)}/checkpoints/latest"
        return cast(m.Checkpoint, await self.send(Call("GET", path)))

    async def context_build(self, request: m.ContextIn) -> m.Context:
        return cast(m.Context, await self.send(_Operations.context_build(request)))
