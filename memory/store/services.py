"""Writes to the item store, and its search (which may write: reads refresh TTLs).

Each put and delete is recorded by the service that makes it: one ``decision`` event of the agent
in its session ``agent:<name>`` (payload ``action`` ``store_put`` / ``store_delete``, the item's id,
namespace and key, never its value), carrying the item's ``data_subject`` so an erasure of the
person redacts the record too. The TTL sweep records one decision per batch, as the tenant's system
agent with ``actor`` ``job:store-ttl``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.models import Agent
from agents.services import system_agent_get
from agents.subjects import SubjectHeld, subject_visible, subject_written
from core.errors import InvalidInput
from core.holds import holds_check
from core.locks import advisory_xact_lock
from memory.embeddings import Embedder, get_embedder, recall_vector
from memory.episodic.models import Event
from memory.episodic.services import agent_session, decision_record
from memory.semantic import selectors as semantic
from memory.semantic.models import MemoryScope, MemoryType, SemanticMemory
from memory.semantic.services.erase import memories_erase

from . import selectors
from .models import MAX_KEY_LENGTH, MAX_LABEL_LENGTH, MAX_NAMESPACE_DEPTH, RESERVED_ROOT, StoreItem

# The whole document: LangGraph's default index field.
WHOLE_DOCUMENT = "$"
MAX_INDEX_PATHS = 32
MAX_PATH_LENGTH = 300
# Characters of indexed text kept in the linked memory row (the embedder reads the first 256
# tokens of it; the lexical index all of it)
MAX_INDEXED_CHARS = 20_000
# Search with a query ranks the best ``offset + limit`` of its candidates; pgvector's HNSW scan
# takes ``ef_search`` up to 1,000
MAX_RANKED = 1000
# The unique index on (namespace, key) holds both: a B-tree entry must stay under a third of a page
# (2,704 bytes), with room for the array's header
MAX_ADDRESS_BYTES = 2400
# LangGraph gives TTLs in minutes; ten years keeps every expiry a valid timestamp
MAX_TTL_MINUTES = 10 * 365 * 24 * 60
_PATH_TOKEN = re.compile(r"\[(?:\*|-?\d+)\]|[^.\[\]]+")


def namespace_check(
    namespace: Any, *, field: str, write: bool = False, allow_empty: bool = False
) -> list[str]:
    """``namespace`` as a list of labels, checked as LangGraph checks it: 1 to
    ``MAX_NAMESPACE_DEPTH`` strings (none with ``allow_empty``), none empty nor holding ".", each
    at most ``MAX_LABEL_LENGTH`` characters; for a ``write`` the root label is not LangGraph's
    reserved ``"langgraph"``. Raises ``InvalidInput`` naming ``field`` (or ``field[i]``)."""
    if not isinstance(namespace, list | tuple):
        raise InvalidInput("A namespace is a list of labels.", field=field)
    labels = list(namespace)
    if not labels and not allow_empty:
        raise InvalidInput("A namespace has at least one label.", field=field)
    if len(labels) > MAX_NAMESPACE_DEPTH:
        raise InvalidInput(f"A namespace has at most {MAX_NAMESPACE_DEPTH} labels.", field=field)
    for i, label in enumerate(labels):
        where = f"{field}[{i}]"
        if not isinstance(label, str):
            raise InvalidInput("A namespace label is a string.", field=where)
        if not label:
            raise InvalidInput("A namespace label may not be empty.", field=where)
        if "." in label:
            raise InvalidInput('A namespace label may not contain ".".', field=where)
        if len(label) > MAX_LABEL_LENGTH:
            raise InvalidInput(f"A namespace label has at most {MAX_LABEL_LENGTH} characters.", field=where)
    if write and labels and labels[0] == RESERVED_ROOT:
        raise InvalidInput(f'The root label "{RESERVED_ROOT}" is reserved by LangGraph.', field=f"{field}[0]")
    return labels


def key_check(key: Any, *, namespace: Sequence[str] = (), field: str = "key") -> str:
    """A key: a non-empty string of at most ``MAX_KEY_LENGTH`` characters, whose UTF-8 bytes with
    those of ``namespace``'s labels are at most ``MAX_ADDRESS_BYTES`` (``InvalidInput``)."""
    if not isinstance(key, str) or not key:
        raise InvalidInput("A key is a non-empty string.", field=field)
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidInput(f"A key has at most {MAX_KEY_LENGTH} characters.", field=field)
    if len(key.encode()) + sum(len(label.encode()) for label in namespace) > MAX_ADDRESS_BYTES:
        raise InvalidInput(
            f"A namespace and key take at most {MAX_ADDRESS_BYTES} bytes of UTF-8 together.", field=field
        )
    return key


def index_paths_check(index: Literal[False] | Sequence[str] | None, *, field: str = "index") -> list[str]:
    """The JSON paths a put indexes: ``None`` the default (the whole document, ``"$"``), ``False``
    none, else the given paths, each LangGraph's syntax (``a.b``, ``a[0]``, ``a[-1]``, ``a[*].b``,
    ``*``; multi-field braces are not supported). Raises ``InvalidInput`` (``index[i]``)."""
    if index is None:
        return [WHOLE_DOCUMENT]
    if index is False:
        return []
    paths = list(index)
    if len(paths) > MAX_INDEX_PATHS:
        raise InvalidInput(f"Index at most {MAX_INDEX_PATHS} paths.", field=field)
    for i, path in enumerate(paths):
        if not isinstance(path, str) or not path or len(path) > MAX_PATH_LENGTH or "\x00" in path:
            raise InvalidInput(
                f"A path is a string of 1 to {MAX_PATH_LENGTH} characters.", field=f"{field}[{i}]"
            )
        if path != WHOLE_DOCUMENT and (
            "{" in path or "".join(_PATH_TOKEN.findall(path)) != path.replace(".", "")
        ):
            raise InvalidInput(
                "Paths are field names joined by '.', with [n], [-n] or [*] after a list field.",
                field=f"{field}[{i}]",
            )
    return list(dict.fromkeys(paths))


def _leaf_texts(value: Any) -> list[str]:
    if isinstance(value, bool | int | float | str):
        return [str(value)]
    if isinstance(value, list | dict):
        return [json.dumps(value, sort_keys=True, ensure_ascii=False)]
    return []


def texts_at(value: Any, path: str) -> list[str]:
    """The texts at ``path`` in ``value``, as LangGraph's stores read them for embedding: a
    scalar as its text, an object or list as JSON (sorted keys), ``"$"`` the whole document; a
    missing field gives nothing. ``[*]`` and ``*`` take every element / value."""
    if path == WHOLE_DOCUMENT:
        return [json.dumps(value, sort_keys=True, ensure_ascii=False)]
    nodes = [value]
    for token in _PATH_TOKEN.findall(path):
        found: list[Any] = []
        for node in nodes:
            if token.startswith("["):
                if not isinstance(node, list):
                    continue
                inner = token[1:-1]
                if inner == "*":
                    found.extend(node)
                elif -len(node) <= int(inner) < len(node):
                    found.append(node[int(inner)])
            elif token == "*":
                found.extend(
                    node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
                )
            elif isinstance(node, dict) and token in node:
                found.append(node[token])
        nodes = found
    return [text for node in nodes for text in _leaf_texts(node)]


def indexed_text(value: Mapping[str, Any], paths: Sequence[str]) -> str:
    """The text of ``value`` that search ranks by: the texts at ``paths``, one per line, at most
    ``MAX_INDEXED_CHARS`` characters (empty when nothing is indexed)."""
    return "\n".join(t for path in paths for t in texts_at(value, path))[:MAX_INDEXED_CHARS]


def _link_hash(item_id: Any) -> str:
    # unique per item: the semantic table's live-content constraint never pairs two items' rows
    return hashlib.sha256(f"store-item:{item_id}".encode()).hexdigest()


@dataclass(frozen=True)
class PutResult:
    """What ``item_put`` did: the item as stored, whether it was ``created``, and the ``event``
    recording it."""

    item: StoreItem
    created: bool
    event: Event


def _record(agent: Agent, item: StoreItem, action: str, **extra: Any) -> Event:
    return decision_record(
        agent=agent,
        session_id=agent_session(agent),
        content=f"{action.replace('_', ' ').capitalize()}: item {item.key!r} in namespace "
        f"{'.'.join(item.namespace)}.",
        payload={
            "action": action,
            "item_id": str(item.pk),
            "namespace": list(item.namespace),
            "key": item.key,
            **extra,
        },
        data_subject=item.data_subject,
    )


def item_put(
    *,
    agent: Agent,
    namespace: Sequence[str],
    key: str,
    value: Mapping[str, Any],
    index: Literal[False] | Sequence[str] | None = None,
    ttl_minutes: float | None = None,
    data_subject: str = "",
    embedder: Embedder | None = None,
    now: datetime | None = None,
) -> PutResult:
    """Create or replace the item at (``namespace``, ``key``) with ``value`` (a JSON object whose
    depth the API has checked), indexed by ``index`` (``index_paths_check``) in its linked semantic
    memory row (embedded before the transaction; created, rewritten or removed with the item's
    indexed text), expiring ``ttl_minutes`` after this write when given (None: never). A replace
    keeps ``created_at`` and sets ``updated_at``, the writer and the ``data_subject``. Concurrent
    puts of one item take turns (an advisory lock). Recorded (``store_put``).

    ``data_subject`` is ``agents.subjects.subject_written``'s: an agent acting for one end user writes
    its subject, and may not replace an item of another subject.

    Raises ``InvalidInput`` for a bad namespace (field ``namespace``), key, value (not an object),
    index path or TTL (field ``ttl``: above 0); ``SubjectRefused`` (403) for another subject given,
    ``SubjectHeld`` (403, field ``key``) for an item of another subject there; ``EmbedderUnavailable`` (503) when something is to be indexed and the
    embedder is down (nothing is stored)."""
    data_subject = subject_written(agent, data_subject)
    labels = namespace_check(namespace, field="namespace", write=True)
    key = key_check(key, namespace=labels)
    if not isinstance(value, Mapping):
        raise InvalidInput("A value is a JSON object.", field="value")
    if ttl_minutes is not None and not (math.isfinite(ttl_minutes) and 0 < ttl_minutes <= MAX_TTL_MINUTES):
        raise InvalidInput(
            f"A TTL is a number of minutes above 0, at most {MAX_TTL_MINUTES}, or null.", field="ttl"
        )
    paths = index_paths_check(index)
    text = indexed_text(value, paths)
    embedder = (embedder or get_embedder()) if text else None
    vector = embedder.embed([text])[0] if embedder is not None else None
    now = now or timezone.now()
    expires_at = now + timedelta(minutes=ttl_minutes) if ttl_minutes is not None else None
    with transaction.atomic():
        advisory_xact_lock("store-item", ".".join(labels), key)
        item = StoreItem.objects.select_for_update().filter(namespace=labels, key=key).first()
        created = item is None or (item.expires_at is not None and item.expires_at <= now)
        if item is not None and not created and not subject_visible(agent, item.data_subject):
            raise SubjectHeld(bound=agent.acting_for, field="key")
        if item is None:
            item = StoreItem(namespace=labels, key=key, created_by=agent, created_at=now)
        elif created:  # an expired item the sweep has not reached: this put starts a new one
            item.created_by, item.created_at = agent, now
        item.value = dict(value)
        item.index_paths = paths if text else []
        item.data_subject = data_subject
        item.updated_by = agent
        item.updated_at = now
        item.ttl_minutes = ttl_minutes
        item.expires_at = expires_at
        old_memory_id = item.memory_id
        _link_memory(item, text=text, vector=vector, embedder=embedder, now=now)
        item.save()
        if old_memory_id is not None and item.memory_id != old_memory_id:
            memories_erase(memory_ids=[old_memory_id])
        event = _record(
            agent,
            item,
            "store_put",
            created=created,
            indexed=item.index_paths,
            ttl_minutes=ttl_minutes,
        )
    return PutResult(item, created, event)


def _link_memory(
    item: StoreItem, *, text: str, vector: Any, embedder: Embedder | None, now: datetime
) -> None:
    """Point ``item`` (not saved yet) at the semantic memory row that indexes it: its row rewritten
    with ``text`` and ``vector``, or a new shared ``store`` row of the system agent; at none when
    nothing is indexed (``vector`` None). A row it no longer points at is the caller's to erase."""
    if vector is None or embedder is None:
        item.memory = None
        return
    fields = {
        "content": text,
        "content_hash": _link_hash(item.pk),
        "data_subject": item.data_subject,
        "embedding": vector,
        "embedding_model": embedder.name,
        "embedding_dimensions": embedder.dimensions,
    }
    if item.memory_id is not None:
        SemanticMemory.objects.filter(pk=item.memory_id).update(**fields)
    else:
        item.memory = SemanticMemory.objects.create(
            agent=system_agent_get(),
            scope=MemoryScope.SHARED,
            memory_type=MemoryType.STORE,
            created_at=now,
            **fields,
        )


def item_delete(*, agent: Agent, namespace: Sequence[str], key: str) -> Event | None:
    """Delete the item at (``namespace``, ``key``) with its linked memory row, recorded
    (``store_delete``); None (and nothing recorded) when there is no such item. Any agent allowed
    to write deletes any item (the store is shared: see ``models``). Raises ``InvalidInput`` for a
    bad namespace or key, ``Conflict`` (field ``key``) when a legal hold covers the item. An item of
    another end user than the one ``agent`` acts for is as absent (``agents.subjects``)."""
    labels = namespace_check(namespace, field="namespace")
    key = key_check(key)
    with transaction.atomic():
        advisory_xact_lock("store-item", ".".join(labels), key)
        item = StoreItem.objects.select_for_update().filter(namespace=labels, key=key).first()
        if item is None or not subject_visible(agent, item.data_subject):
            return None
        holds_check(layer="store", rows=StoreItem.objects.filter(pk=item.pk), field="key")
        memory_id = item.memory_id
        item.delete()
        if memory_id is not None:
            memories_erase(memory_ids=[memory_id])
        return _record(agent, item, "store_delete")


def _refresh(items: Sequence[StoreItem], now: datetime) -> None:
    """Restart the TTL of ``items`` that have one (LangGraph's ``refresh_ttl``) at ``now``."""
    timed = [i for i in items if i.ttl_minutes is not None]
    for item in timed:
        assert item.ttl_minutes is not None
        item.expires_at = now + timedelta(minutes=item.ttl_minutes)
    if timed:
        StoreItem.objects.bulk_update(timed, ["expires_at"])


def item_get(
    *,
    agent: Agent,
    namespace: Sequence[str],
    key: str,
    refresh_ttl: bool = True,
    now: datetime | None = None,
) -> StoreItem | None:
    """The live item at (``namespace``, ``key``) ``agent`` may read (``selectors.readable_q``), its
    TTL restarted with ``refresh_ttl``; None when there is none (or it expired, or it is another end
    user's than the one ``agent`` acts for). Raises ``InvalidInput`` for a bad namespace or key."""
    labels = namespace_check(namespace, field="namespace")
    key = key_check(key)
    now = now or timezone.now()
    item = selectors.item_find(agent=agent, namespace=labels, key=key, now=now)
    if item is not None and refresh_ttl:
        _refresh([item], now)
    return item


@dataclass(frozen=True)
class Found:
    """One item of ``items_search`` and its ``score`` (None without a query, or for an item that is
    not indexed)."""

    item: StoreItem
    score: float | None


def items_search(
    *,
    agent: Agent,
    data_subject: str | None = None,
    namespace_prefix: Sequence[str],
    query: str | None = None,
    conditions: Mapping[str, Any] | None = None,
    limit: int = 10,
    offset: int = 0,
    refresh_ttl: bool = True,
    now: datetime | None = None,
) -> list[Found]:
    """Items ``agent`` may read (``selectors.readable_q``: ``data_subject`` keeps one end user's) under
    ``namespace_prefix`` (``[]``: all) whose values match ``conditions``
    (``selectors.value_filter_q``), ``offset`` then at most ``limit`` of them.

    Without a ``query``: newest change first, ``score`` None. With one: ranked by semantic
    memory's hybrid recall over the items' linked rows (``memory.semantic.selectors.hybrid_search``:
    the HNSW and lexical candidates of the query, ``relevance = TEXT_WEIGHT * bm25 / max(best bm25,
    the query's IDF mass) + (1 - TEXT_WEIGHT) * cosine``), best first, ``score`` that relevance in [0, 1]; recency and
    importance weigh 0 (an item is no memory that fades). Items matching but not indexed follow
    the ranked ones with ``score`` None, as LangGraph's stores fill a page. With ``refresh_ttl``
    the returned items' TTLs restart. Raises ``InvalidInput`` for a bad prefix, filter, or a ranked
    page beyond ``MAX_RANKED`` (field ``offset``); ``EmbedderUnavailable`` (503)."""
    labels = namespace_check(namespace_prefix, field="namespace_prefix", allow_empty=True)
    now = now or timezone.now()
    matching = selectors.items_matching(
        agent=agent, namespace_prefix=labels, conditions=conditions, now=now, data_subject=data_subject
    )
    if query is None:
        found = [Found(item, None) for item in matching[offset : offset + limit]]
    else:
        found = _ranked(matching, query=query, limit=limit, offset=offset, now=now)
    if refresh_ttl:
        _refresh([f.item for f in found], now)
    return found


def _ranked(
    matching: QuerySet[StoreItem], *, query: str, limit: int, offset: int, now: datetime
) -> list[Found]:
    if offset + limit > MAX_RANKED:
        raise InvalidInput(
            f"A search with a query ranks at most {MAX_RANKED} items (offset + limit).", field="offset"
        )
    embedder = get_embedder()
    dims = int(embedder.dimensions)
    # The items the prefix and filter select reach the ranking as a subquery of the linked rows'
    # ids. With a prefix the planner misestimates it and ranks every selected row exactly, a few
    # times slower than a search without one (docs/decisions/0027: figures, and the copy of the
    # namespace onto the linked row that would drop the subquery).
    linked = matching.filter(memory__isnull=False).order_by().values("memory_id")
    where, params = semantic.rows_filter_sql(
        Q(memory_type=MemoryType.STORE, forgotten_at__isnull=True, pk__in=linked),
        model=embedder.name,
        dimensions=dims,
    )
    wanted = offset + limit
    ranked = semantic.hybrid_search(
        where=where,
        params=params,
        vector=list(recall_vector(query)),
        dimensions=dims,
        idf=semantic.lexeme_idf(semantic.query_lexemes(query)),
        pool=max(wanted, 40),
        # the hybrid relevance alone: recency and importance say nothing about an item
        weights=semantic.ScoreWeights(1.0, 0.0, 0.0, 0.0),
        now=now,
        limit=wanted,
        ef_search=max(wanted, 40),
    )
    by_memory = {
        i.memory_id: i for i in StoreItem.objects.filter(memory_id__in=[r.memory.pk for r in ranked])
    }
    found = [Found(by_memory[r.memory.pk], r.score) for r in ranked if r.memory.pk in by_memory][offset:]
    if len(found) < limit:
        # LangGraph's stores fill a short page with the matching items that have no vector
        skip = max(0, offset - len(ranked))
        rest = matching.filter(memory__isnull=True)[skip : skip + limit - len(found)]
        found += [Found(item, None) for item in rest]
    return found


def namespaces_list(
    *,
    agent: Agent,
    data_subject: str | None = None,
    prefix: Sequence[str] | None = None,
    suffix: Sequence[str] | None = None,
    max_depth: int | None = None,
    limit: int = 100,
    offset: int = 0,
    now: datetime | None = None,
) -> list[list[str]]:
    """LangGraph's ``list_namespaces``: the namespaces of the items ``agent`` may read
    (``selectors.readable_q``: ``data_subject`` keeps one end user's) starting with ``prefix`` and
    ending with ``suffix`` ("*" matches any one label), cut to ``max_depth`` labels, sorted,
    paged by ``offset`` / ``limit`` (``selectors.namespaces_list``). Raises ``InvalidInput`` for a
    bad prefix or suffix (labels as in a namespace, "*" allowed)."""
    conditions = []
    for kind, path in (("prefix", prefix), ("suffix", suffix)):
        if path is not None:
            conditions.append((kind, namespace_check(path, field=kind, allow_empty=True)))
    return selectors.namespaces_list(
        agent=agent,
        data_subject=data_subject,
        conditions=conditions,
        max_depth=max_depth,
        limit=limit,
        offset=offset,
        now=now or timezone.now(),
    )


def items_erase(*, item_ids: Sequence[Any]) -> tuple[list[str], list[str]]:
    """Delete the items ``item_ids`` for good with their linked memory rows (text, vector,
    postings); returns ``(item ids, memory ids)`` deleted. The caller records why (an erasure, a
    retention pass or the TTL sweep)."""
    if not item_ids:
        return [], []
    with transaction.atomic():
        rows = list(StoreItem.objects.filter(pk__in=list(item_ids)).values_list("pk", "memory_id"))
        StoreItem.objects.filter(pk__in=[pk for pk, _ in rows]).delete()
        memories = memories_erase(memory_ids=[m for _, m in rows if m is not None])
    return sorted(str(pk) for pk, _ in rows), memories


# Items the sweep deletes per transaction.
SWEEP_BATCH = 1000


def items_expire(*, now: datetime | None = None, batch: int = SWEEP_BATCH) -> int:
    """Delete the items whose TTL has run out (``expires_at`` at or before ``now``), ``batch`` per
    transaction, each batch recorded as one decision of the tenant's system agent (``actor``
    ``job:store-ttl``, payload ``action`` ``store_expired`` and the item ids). Items a legal hold
    covers stay (reads keep leaving them out) until the hold is released. Returns how many were
    deleted."""
    now = now or timezone.now()
    deleted = 0
    while True:
        with transaction.atomic():
            expired = holds_check(
                layer="store", rows=StoreItem.objects.filter(expires_at__lte=now), refuse=False
            )
            ids = list(
                expired.select_for_update(skip_locked=True)
                .order_by("expires_at")
                .values_list("pk", flat=True)[:batch]
            )
            if not ids:
                return deleted
            erased, _ = items_erase(item_ids=ids)
            decision_record(
                agent=system_agent_get(),
                session_id="store",
                actor="job:store-ttl",
                content=f"Deleted {len(erased)} store item(s) whose TTL ran out.",
                payload={"action": "store_expired", "item_ids": erased},
            )
            deleted += len(erased)
        if len(ids) < batch:
            return deleted
