"""Saving and restoring checkpoints: PostgreSQL is the record, Redis the hot copy of each stream's latest.

Who may write and read: checkpoints are per agent within a session. A session is shared by the
agents of a multi-agent system (their events carry the same ``session_id``), so each agent has its
own checkpoint stream in it: step order, idempotency keys, the listing, the latest and one step are
all scoped to (session, calling agent). An agent can neither write into nor read another agent's
stream (checkpoints are private state, like the scratchpad); saving into a session another agent
uses starts the caller's own stream and never changes what that agent restores.

Save: one transaction per checkpoint, serialised per (session, agent) by a transaction-level
advisory lock, taken with the checks and the insert in one call of the schema's function
``memory_checkpoint_save`` (one round trip); after the commit (``transaction.on_commit``) the checkpoint's JSON document goes to
Redis under ``{tenant}:ckpt:<session_id>:<agent id>`` (a hash ``{step, body}``) with the tenant's
``checkpoint_cache_ttl_seconds``. A Lua script writes only if the cached step is not newer, so two
commits whose after-commit writes arrive out of order cannot leave an older checkpoint cached.

Restore: Redis first (one ``HGET``); on a miss, PostgreSQL, then the copy is re-warmed. When Redis
cannot be reached, saves and restores still work from PostgreSQL and say so (``degraded``).

If a save commits while Redis is unreachable, Redis may still hold the previous checkpoint when it
comes back (a network split rather than a restart). This process remembers such streams (at most
``PENDING_LIMIT``) and, at its next checkpoint call that reaches Redis, drops their copies when older
than the saved step, so the next restore reads PostgreSQL. Another process that never saw the failure
could serve the older copy until then, or until the TTL ends.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import redis
from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.numeric import Int4, Int8
from redis.commands.core import Script
from redis.crc import key_slot

from agents.models import Agent
from core.db.base import fetch_prepared
from core.errors import Conflict, InvalidInput, NotFound, PayloadTooLarge, PermissionDenied
from core.holds import holds_check
from core.locks import advisory_xact_lock, lock_name
from core.metrics import record_lookup
from core.redis import check_id, get_redis, tenant_key
from memory.episodic.models import Event
from memory.episodic.services import decision_record
from tenants.models import WorkingMemoryPolicy

from . import selectors
from .models import (
    MAX_NAMESPACE_LENGTH,
    MAX_SCHEMA_VERSION,
    MAX_SERIALIZED_TYPE_LENGTH,
    MAX_STEP_INDEX,
    SPECIAL_WRITE_CHANNELS,
    Checkpoint,
    CheckpointWrite,
    canonical_json,
    document_json,
    fingerprint_prefix,
)

logger = logging.getLogger(__name__)

MAX_STATE_BYTES = (
    1024 * 1024
)  # 1 MiB of JSON (UTF-8): larger state belongs in semantic memory or a blob store
MAX_PLAN_BYTES = 256 * 1024
MAX_KEY_LENGTH = 255
MAX_METADATA_BYTES = 64 * 1024
MAX_WRITES = 1_000  # pending writes in one call (a LangGraph task writes a handful)
MAX_TASK_ID_LENGTH = 200
MAX_CHANNEL_LENGTH = 200
MAX_SUBJECT_LENGTH = 200  # Checkpoint.data_subject
PENDING_LIMIT = 10_000
DEGRADED_HEADER_VALUE = "redis-unavailable"

Source = Literal["redis", "postgres"]

# KEYS[1] = cache key; ARGV = step, body, ttl seconds. Writes unless a newer step is cached; 1 if written.
# registered without a client (``None``): each call passes the client it runs on
_PUT_IF_NOT_NEWER = Script(
    None,  # type: ignore[arg-type]
    b"""
local cached = redis.call('HGET', KEYS[1], 'step')
if cached and tonumber(cached) > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'step', ARGV[1], 'body', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
""",
)
# KEYS[i] = cache key, ARGV[i] = its step, for i = 1..n (keys of one hash slot: a Redis Cluster
# runs a script only over keys of one slot). Deletes each copy older than its step; returns how many.
_DELETE_IF_OLDER = Script(
    None,  # type: ignore[arg-type]
    b"""
local deleted = 0
for i, key in ipairs(KEYS) do
  local cached = redis.call('HGET', key, 'step')
  if cached and tonumber(cached) < tonumber(ARGV[i]) then deleted = deleted + redis.call('DEL', key) end
end
return deleted
""",
)
# keys per call of _DELETE_IF_OLDER: a script blocks its Redis while it runs (~1 µs per key)
FLUSH_BATCH = 500

_pending: OrderedDict[str, int] = OrderedDict()
_pending_lock = threading.Lock()


class SaveResult:
    """What ``checkpoint_save`` did.

    ``replayed``: the idempotency key was already used with the same body; ``checkpoint`` is the
    stored one. ``cached``: ``True`` once Redis holds the copy, ``False`` when Redis could not be
    reached after the commit, ``None`` for a replay or while an outer transaction has not committed.

    A new checkpoint's ``Checkpoint`` instance is built on first access to ``checkpoint`` (from the
    values the save already holds, no query): a caller that needs only ``cached`` (the LangGraph
    saver's put, the benchmarks) does not pay ``Model.__init__`` (~15 µs).
    """

    __slots__ = ("_build", "_checkpoint", "cached", "replayed")

    def __init__(
        self,
        *,
        replayed: bool,
        checkpoint: Checkpoint | None = None,
        build: Callable[[], Checkpoint] | None = None,
        cached: bool | None = None,
    ) -> None:
        """``checkpoint``, or ``build``: a function that makes it when first asked for."""
        if (checkpoint is None) == (build is None):
            raise TypeError("give checkpoint or build, not both or neither")
        self._checkpoint, self._build = checkpoint, build
        self.replayed, self.cached = replayed, cached

    @property
    def checkpoint(self) -> Checkpoint:
        """The checkpoint saved (or replayed), as if loaded from PostgreSQL (``agent`` set)."""
        if self._checkpoint is None:
            assert self._build is not None
            self._checkpoint, self._build = self._build(), None
        return self._checkpoint

    @property
    def degraded(self) -> bool:
        """Saved in PostgreSQL, but the Redis copy could not be written."""
        return self.cached is False

    def __repr__(self) -> str:
        return f"SaveResult(replayed={self.replayed}, cached={self.cached})"


@dataclass(frozen=True)
class Restored:
    """The latest checkpoint of a session as the JSON document bytes (``None``: the session has none).

    ``source`` says which store answered; ``degraded`` that Redis could not be reached (or re-warmed).
    """

    body: bytes | None
    source: Source
    degraded: bool = False

    def data(self) -> dict[str, Any] | None:
        """The document parsed (see ``Checkpoint.document``)."""
        return None if self.body is None else json.loads(self.body)


def cache_key(session_id: str, agent_id: int, checkpoint_ns: str = "") -> str:
    """The Redis key of the latest checkpoint of agent ``agent_id`` in the session and namespace
    (current tenant).

    ``{tenant}:ckpt:<session_id>:<agent id>`` for the root namespace ``""``, with
    ``:ns:<SHA-256 of the namespace, 32 hex>`` appended for another (a namespace may hold any
    character): session ids cannot contain ``:``, so keys never collide.
    """
    if not checkpoint_ns:
        return tenant_key("ckpt", session_id, agent_id)
    return tenant_key(
        "ckpt", session_id, agent_id, "ns", hashlib.sha256(checkpoint_ns.encode()).hexdigest()[:32]
    )


# a NUL character in a JSON string: canonical JSON writes it as the escape \u0000, and a backslash
# of the text itself as \\, so the escape is one preceded by an even number of backslashes
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def _json_text(value: Any, *, field: str, limit: int) -> str:
    """``value`` in canonical JSON (``canonical_json``), checked: no NUL character (PostgreSQL's
    jsonb refuses them) and at most ``limit`` bytes as UTF-8. Raises ``InvalidInput`` or
    ``PayloadTooLarge`` naming ``field``."""
    text = canonical_json(value)
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise InvalidInput(f"{field} must not contain NUL characters.", field=field)
    # UTF-8 takes at least one byte per character: count the bytes only when it could matter
    if len(text) > limit // 4 and (size := len(text.encode("utf-8"))) > limit:
        hint = (
            ""
            if field == "metadata"
            else " Keep large material in semantic memory and reference it from the state."
        )
        raise PayloadTooLarge(
            f"{field} is {size} bytes of JSON; a checkpoint allows at most {limit} bytes.{hint}", field=field
        )
    return text


def _check_key(value: Any, *, field: str) -> None:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_KEY_LENGTH or not value.isprintable():
        raise InvalidInput(f"{field} must be 1 to {MAX_KEY_LENGTH} printable characters.", field=field)


def check_namespace(value: Any, *, field: str = "checkpoint_ns") -> str:
    """Validate a checkpoint namespace: at most ``MAX_NAMESPACE_LENGTH`` printable characters ("" is
    the root). Raises ``InvalidInput`` naming ``field``."""
    if not isinstance(value, str) or len(value) > MAX_NAMESPACE_LENGTH or not value.isprintable():
        raise InvalidInput(
            f"{field} must be at most {MAX_NAMESPACE_LENGTH} printable characters.", field=field
        )
    return value


def _check_serialized_type(value: Any, *, field: str) -> None:
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_SERIALIZED_TYPE_LENGTH
        or not value.isprintable()
    ):
        raise InvalidInput(
            f"{field} must be 1 to {MAX_SERIALIZED_TYPE_LENGTH} printable characters.", field=field
        )


@dataclass(frozen=True)
class _Body:
    """A checked checkpoint body's JSON values in canonical JSON (serialised once, see ``_json_text``)."""

    state_json: str
    plan_json: str
    metadata_json: str


def _check_input(
    *,
    session_id: str,
    step_index: int | None,
    idempotency_key: str,
    state: Any,
    plan: Any,
    schema_version: int,
    checkpoint_ns: str = "",
    parent_key: str = "",
    metadata: Any = None,
    serialized: tuple[str, bytes] | None = None,
    data_subject: Any = "",
) -> _Body:
    check_id(session_id, field="session_id")
    _check_key(idempotency_key, field="idempotency_key")
    if step_index is not None and (
        isinstance(step_index, bool)
        or not isinstance(step_index, int)
        or not 0 <= step_index <= MAX_STEP_INDEX
    ):
        raise InvalidInput(f"step_index must be an integer from 0 to {MAX_STEP_INDEX}.", field="step_index")
    check_namespace(checkpoint_ns)
    if parent_key:
        _check_key(parent_key, field="parent_key")
    if not isinstance(data_subject, str) or len(data_subject) > MAX_SUBJECT_LENGTH:
        raise InvalidInput(
            f"data_subject must be text of at most {MAX_SUBJECT_LENGTH} characters.", field="data_subject"
        )
    metadata_json = "{}"
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise InvalidInput("metadata must be a JSON object.", field="metadata")
        metadata_json = _json_text(metadata, field="metadata", limit=MAX_METADATA_BYTES)
    if serialized is not None:
        kind, data = serialized
        _check_serialized_type(kind, field="serialized.type")
        if len(data) > MAX_STATE_BYTES:
            raise PayloadTooLarge(
                f"serialized.data is {len(data)} bytes; a checkpoint allows at most {MAX_STATE_BYTES}.",
                field="serialized.data",
            )
    if (
        isinstance(schema_version, bool)
        or not isinstance(schema_version, int)
        or not 1 <= schema_version <= MAX_SCHEMA_VERSION
    ):
        raise InvalidInput(
            f"schema_version must be an integer from 1 to {MAX_SCHEMA_VERSION}.", field="schema_version"
        )
    if not isinstance(state, dict):
        raise InvalidInput("state must be a JSON object.", field="state")
    if not isinstance(plan, list):
        raise InvalidInput("plan must be a JSON list of steps.", field="plan")
    return _Body(
        state_json=_json_text(state, field="state", limit=MAX_STATE_BYTES),
        plan_json=_json_text(plan, field="plan", limit=MAX_PLAN_BYTES),
        metadata_json=metadata_json,
    )


def _differing_fields(checkpoint: Checkpoint, **body: Any) -> list[str]:
    return [name for name, value in body.items() if getattr(checkpoint, name) != value] or ["body"]


def _remember_stale(key: str, step_index: int) -> None:
    with _pending_lock:
        _pending[key] = max(step_index, _pending.get(key, step_index))
        _pending.move_to_end(key)
        while len(_pending) > PENDING_LIMIT:
            _pending.popitem(last=False)


def _flush_pending(client: redis.Redis) -> None:
    """Drop cached copies older than checkpoints saved while Redis was unreachable. Raises RedisError.

    One script call per hash slot (the tenant's hash tag: one slot per tenant) and at most
    ``FLUSH_BATCH`` keys: a Redis Cluster runs a script only over keys of one slot, and refuses
    scripts in its pipelines. Keys flushed are forgotten as each call returns, so a failure part way
    leaves only the rest pending."""
    if not _pending:  # the common case: no lock, no round trip
        return
    with _pending_lock:
        items = list(_pending.items())
    by_slot: dict[int, list[tuple[str, int]]] = {}
    for key, step in items:
        by_slot.setdefault(key_slot(key.encode()), []).append((key, step))
    for group in by_slot.values():
        for start in range(0, len(group), FLUSH_BATCH):
            batch = group[start : start + FLUSH_BATCH]
            _DELETE_IF_OLDER(keys=[key for key, _ in batch], args=[step for _, step in batch], client=client)
            with _pending_lock:
                for key, step in batch:
                    if _pending.get(key) == step:  # not remembered again meanwhile with a later step
                        del _pending[key]


def _cache_put(*, key: str, step_index: int, body: bytes, ttl_seconds: int) -> bool:
    """Write the copy unless a newer one is cached; ``False`` when Redis could not be used."""
    try:
        client = get_redis()
        _flush_pending(client)
        _PUT_IF_NOT_NEWER(keys=[key], args=[step_index, body, ttl_seconds], client=client)
    except redis.RedisError as exc:
        logger.warning("checkpoint cache write for %s failed: %s", key, exc)
        return False
    return True


def checkpoint_save(
    *,
    agent: Agent,
    session_id: str,
    step_index: int | None,
    idempotency_key: str,
    state: dict[str, Any],
    plan: list[Any],
    schema_version: int = 1,
    policy: WorkingMemoryPolicy,
    data_subject: str = "",
    checkpoint_ns: str = "",
    parent_key: str = "",
    metadata: dict[str, Any] | None = None,
    serialized: tuple[str, bytes] | None = None,
) -> SaveResult:
    """Store ``agent``'s checkpoint of ``session_id`` after step ``step_index`` in the current tenant.

    The checkpoint joins ``agent``'s own stream in the session: step order and idempotency keys are
    checked against that stream only, and other agents' checkpoints in the session are never read
    or changed. ``state`` is a JSON object of at most ``MAX_STATE_BYTES`` (1 MiB) as UTF-8 JSON, ``plan`` a JSON
    list of at most ``MAX_PLAN_BYTES``. After the commit, the checkpoint is cached in Redis for
    ``policy.checkpoint_cache_ttl_seconds``; a Redis failure then only sets ``cached=False``.

    ``data_subject``: the person the state is about (what erasures and holds target), or "".

    ``step_index`` ``None``: the next step of the stream (its latest + 1, or 0), chosen under the
    stream's lock; a replay then compares the body with the stored step. The LangGraph fields:
    ``checkpoint_ns`` (a label within the agent's stream, "" the root: steps and keys stay unique
    across namespaces), ``parent_key`` (the idempotency key of the checkpoint it follows, not
    checked), ``metadata`` (a JSON object of at most ``MAX_METADATA_BYTES``, filterable) and
    ``serialized`` (``(type tag, bytes)`` of an opaque serialized checkpoint, at most
    ``MAX_STATE_BYTES``: stored and returned as they are, never decoded here).

    Returns a ``SaveResult``: a new checkpoint, or the stored one (``replayed=True``) when this
    ``idempotency_key`` was already used by ``agent`` in the session with the same body.

    The common case, a new checkpoint after the stream's latest, is one call to PostgreSQL (the
    function ``memory_checkpoint_save``: the stream's lock, then the checks and the insert) and one
    script call to Redis; a replay or a refusal is then told apart under the lock.

    Raises ``InvalidInput`` (bad ids or types, NUL characters, ``data_subject`` too long), ``PayloadTooLarge`` (field ``state``
    or ``plan``), ``Conflict`` with field ``idempotency_key`` (the key was used with another body)
    or ``step_index`` (not greater than the latest step of ``agent`` in the session, which the
    message gives).
    """
    body = _check_input(
        session_id=session_id,
        step_index=step_index,
        idempotency_key=idempotency_key,
        state=state,
        plan=plan,
        schema_version=schema_version,
        checkpoint_ns=checkpoint_ns,
        parent_key=parent_key,
        metadata=metadata,
        serialized=serialized,
        data_subject=data_subject,
    )
    metadata = metadata or {}
    serialized_type, serialized_bytes = serialized if serialized is not None else ("", None)
    prefix = fingerprint_prefix(
        state_json=body.state_json,
        plan_json=body.plan_json,
        schema_version=schema_version,
        checkpoint_ns=checkpoint_ns,
        parent_key=parent_key,
        metadata_json=body.metadata_json,
        serialized_type=serialized_type,
        serialized=serialized_bytes,
    )
    created_at = timezone.now()
    # in _SAVE_SQL's order; Int8/Int4: stable parameter types, so one prepared statement
    params = [
        lock_name("ckpt", session_id, agent.pk),
        session_id,
        Int8(agent.pk),
        idempotency_key,
        None if step_index is None else Int8(step_index),
        _MAX_STEP,
        body.state_json,
        body.plan_json,
        Int4(schema_version),
        created_at,
        prefix,
        data_subject,
        checkpoint_ns,
        body.metadata_json,
        parent_key,
        serialized_type,
        serialized_bytes,
    ]
    saved = _insert_next(params)
    if saved is None:  # a replay, a refusal, or the stream changed between the two messages
        with transaction.atomic():
            advisory_xact_lock("ckpt", session_id, agent.pk)
            replayed = _replay_or_refuse(
                agent=agent,
                session_id=session_id,
                step_index=step_index,
                idempotency_key=idempotency_key,
                body={
                    "state": state,
                    "plan": plan,
                    "schema_version": schema_version,
                    "checkpoint_ns": checkpoint_ns,
                    "parent_key": parent_key,
                    "metadata": metadata,
                    "serialized_type": serialized_type,
                },
                serialized=serialized_bytes,
                prefix=prefix,
            )
            if replayed is not None:
                return SaveResult(checkpoint=replayed, replayed=True)
            saved = _insert_next(params)  # the checks passed under the lock: so does the insert
            if saved is None:
                raise Conflict(
                    "The checkpoint stream changed during the save; send it again.", field="step_index"
                )
    pk, saved_step, fingerprint = saved

    def build() -> Checkpoint:
        checkpoint = Checkpoint(
            id=pk,
            session_id=session_id,
            step_index=saved_step,
            idempotency_key=idempotency_key,
            state=state,
            plan=plan,
            schema_version=schema_version,
            agent=agent,
            data_subject=data_subject,
            created_at=created_at,
            fingerprint=fingerprint,
            checkpoint_ns=checkpoint_ns,
            parent_key=parent_key,
            metadata=metadata,
            serialized_type=serialized_type,
            serialized=serialized_bytes,
        )
        checkpoint._state.adding, checkpoint._state.db = False, alias  # as if loaded
        return checkpoint

    alias = connection.alias
    result = SaveResult(build=build, replayed=False)
    key, document, ttl = (
        cache_key(session_id, agent.pk, checkpoint_ns),
        document_json(
            pk=pk,
            session_id=session_id,
            step_index=saved_step,
            idempotency_key=idempotency_key,
            schema_version=schema_version,
            agent_name=agent.name,
            created_at=created_at,
            checkpoint_ns=checkpoint_ns,
            parent_key=parent_key,
            metadata_json=body.metadata_json,
            state_json=body.state_json,
            plan_json=body.plan_json,
            serialized_type=serialized_type,
            serialized=serialized_bytes,
        ),
        policy.checkpoint_cache_ttl_seconds,
    )

    def cache_after_commit() -> None:
        result.cached = _cache_put(key=key, step_index=saved_step, body=document, ttl_seconds=ttl)
        if not result.cached:
            _remember_stale(key, saved_step)

    # outside a transaction the message above has committed: this runs now
    transaction.on_commit(cache_after_commit)
    return result


# The stream's lock, then the checks and the insert, in one round trip: a function of the tenant's
# schema (migration 0018_checkpoint_save_function, where the reasons are). Measured on 2 busy
# cores (load 9): the lock, a SELECT, the insert and a COMMIT as four round trips took 5-15 ms,
# mostly waiting to be scheduled between them.
_SAVE_SQL = (
    "SELECT saved_id, saved_step, saved_fingerprint FROM memory_checkpoint_save(%s, %s, %s::bigint, "
    "%s, %s::bigint, %s::bigint, %s::jsonb, %s::jsonb, %s::integer, %s::timestamptz, %s, %s, %s, "
    "%s::jsonb, %s, %s, %s::bytea)"
)
_MAX_STEP = Int8(MAX_STEP_INDEX)


def _insert_next(params: list[Any]) -> tuple[int, int, str] | None:
    """Call ``memory_checkpoint_save`` as a prepared statement (``fetch_prepared``: the call is
    parsed once per connection, and the ~2 KiB of state travels as a parameter, not quoted into
    the statement's text; ``params`` in its order, positional: no names to resolve per call):
    ``(id, step, fingerprint)`` of the checkpoint inserted, or ``None``
    (nothing inserted). Outside a transaction the call commits on its own."""
    pk, step, fingerprint = fetch_prepared(_SAVE_SQL, params) or (None, None, None)
    return None if pk is None else (pk, step, fingerprint)


def _replay_or_refuse(
    *,
    agent: Agent,
    session_id: str,
    step_index: int | None,
    idempotency_key: str,
    body: dict[str, Any],
    serialized: bytes | None,
    prefix: str,
) -> Checkpoint | None:
    """Under the stream's lock: the stored checkpoint when this save replays it, else ``None`` if
    the save may go ahead. Raises ``Conflict`` (the key used with another body, a step not after
    the latest, the last step reached)."""
    latest, by_key = selectors.checkpoint_stream_head(
        agent=agent, session_id=session_id, idempotency_key=idempotency_key
    )
    existing = (
        None
        if by_key is None
        else selectors.checkpoint_by_key(agent=agent, session_id=session_id, idempotency_key=idempotency_key)
    )
    if existing is not None:
        step = existing.step_index if step_index is None else step_index
        if existing.fingerprint != hashlib.sha256(f"{prefix}{step}}}".encode()).hexdigest():
            differing = _differing_fields(existing, step_index=step, **body)
            if serialized is not None and bytes(existing.serialized or b"") != serialized:
                differing = [f for f in differing if f != "body"] + ["serialized"]
            raise Conflict(
                f"idempotency_key {idempotency_key!r} was already used by you in this session for step "
                f"{existing.step_index} with a different body (differs in: {', '.join(differing)}).",
                field="idempotency_key",
            )
        return existing
    if step_index is None:
        if latest is not None and latest + 1 > MAX_STEP_INDEX:
            raise Conflict(f"This stream has reached step {MAX_STEP_INDEX}.", field="step_index")
    elif latest is not None and step_index <= latest:
        raise Conflict(
            f"step_index {step_index} is not after your latest checkpoint in this session, step "
            f"{latest}; send a step_index greater than {latest}.",
            field="step_index",
        )
    return None


def checkpoint_latest(
    *, agent: Agent, session_id: str, policy: WorkingMemoryPolicy, checkpoint_ns: str = ""
) -> Restored:
    """``agent``'s latest checkpoint in ``session_id`` and namespace ``checkpoint_ns`` ("" the root)
    (current tenant), from Redis or else PostgreSQL.

    Only ``agent``'s own stream is read: another agent's checkpoints in the session are never
    returned (``body`` is ``None`` when ``agent`` saved none there). A Redis miss reads PostgreSQL and re-warms Redis (TTL ``policy.checkpoint_cache_ttl_seconds``);
    when Redis cannot be reached the answer comes from PostgreSQL with ``degraded=True``. Counts one
    ``checkpoint`` lookup for ``agent``: a hit when Redis answered, else a miss.
    Raises ``InvalidInput`` for a malformed session id or namespace.
    """
    check_id(session_id, field="session_id")
    check_namespace(checkpoint_ns)
    key = cache_key(session_id, agent.pk, checkpoint_ns)
    degraded = False
    try:
        client = get_redis()
        _flush_pending(client)
        body: bytes | None = client.hget(key, "body")  # type: ignore[assignment]  # bytes: no decoding
    except redis.RedisError as exc:
        logger.warning("checkpoint cache read for %s failed: %s", key, exc)
        degraded, body = True, None
    record_lookup(agent=agent.name, layer="checkpoint", hit=body is not None)
    if body is not None:
        return Restored(body=body, source="redis")

    stored = selectors.checkpoint_latest_document(
        agent=agent, session_id=session_id, checkpoint_ns=checkpoint_ns
    )
    if stored is None:
        return Restored(body=None, source="postgres", degraded=degraded)
    step, body = stored
    if not degraded:  # Redis just failed: do not wait for it a second time
        degraded = not _cache_put(
            key=key, step_index=step, body=body, ttl_seconds=policy.checkpoint_cache_ttl_seconds
        )
    return Restored(body=body, source="postgres", degraded=degraded)


def checkpoints_erase(*, checkpoint_ids: list[int]) -> tuple[list[int], list[str]]:
    """Delete the checkpoints ``checkpoint_ids`` of the current tenant, then the Redis copies of
    the streams they were in (the cached latest may be one of them; the next restore reads what is
    left in PostgreSQL). Returns ``(ids deleted, Redis keys deleted)``.

    Raises ``ServiceUnavailable`` when Redis cannot be reached after the delete: an erasure must not
    report a copy gone that may still be cached (run it again; it is idempotent). The caller
    records why."""
    from core.errors import ServiceUnavailable

    if not checkpoint_ids:
        return [], []
    with transaction.atomic():
        rows = list(
            Checkpoint.objects.select_for_update()
            .filter(pk__in=checkpoint_ids)
            .values_list("pk", "session_id", "agent_id", "checkpoint_ns", "idempotency_key")
        )
        Checkpoint.objects.filter(pk__in=[r[0] for r in rows]).delete()
        # their pending writes go with them
        selectors.checkpoint_writes_of(
            checkpoints=[(session_id, agent_id, ns, key) for _, session_id, agent_id, ns, key in rows]
        ).delete()
    keys = sorted({cache_key(session_id, agent_id, ns) for _, session_id, agent_id, ns, _ in rows})
    if keys:
        try:
            get_redis().delete(*keys)
        except redis.RedisError as exc:
            raise ServiceUnavailable(f"Redis cannot be reached to drop checkpoint copies: {exc}") from exc
    return sorted(r[0] for r in rows), keys


@dataclass(frozen=True)
class PendingWrite:
    """One write of a task as sent: ``channel`` and the serializer's ``(type tag, bytes)`` value."""

    channel: str
    value_type: str
    value: bytes


@dataclass(frozen=True)
class StoredWrite:
    """Where one write went: its ``idx``, and whether it was new (``False``: the task had already
    written there; for special channels, replaced)."""

    task_id: str
    channel: str
    idx: int
    created: bool


@dataclass(frozen=True)
class WritesResult:
    """What ``checkpoint_writes_put`` did: one ``StoredWrite`` per write in the order sent, and how
    many rows it created (0: all of them were there already)."""

    writes: list[StoredWrite]
    created: int


def checkpoint_writes_put(
    *,
    agent: Agent,
    session_id: str,
    idempotency_key: str,
    checkpoint_ns: str = "",
    task_id: str,
    task_path: str = "",
    writes: list[PendingWrite],
) -> WritesResult:
    """Store task ``task_id``'s pending writes against ``agent``'s checkpoint ``idempotency_key``
    in the session and namespace (LangGraph's ``put_writes``).

    The rule is LangGraph's (``langgraph.checkpoint.base.WRITES_IDX_MAP``): a write's ``idx`` is its
    position in ``writes``, or for a special channel (``SPECIAL_WRITE_CHANNELS``: ``__error__`` -1,
    ``__scheduled__`` -2, ``__interrupt__`` -3, ``__resume__`` -4) that channel's fixed index. When
    every write is to a special channel they replace what the task wrote there before; otherwise a
    write whose ``(task_id, idx)`` is already stored is left as it is (a retried task writes once).
    At most ``MAX_WRITES`` writes, each value at most ``MAX_STATE_BYTES``.

    The writes belong to ``agent``'s stream (only it reads them back, with the checkpoint); the
    checkpoint need not exist yet: LangGraph may send a task's writes before the background put
    of their checkpoint has landed.

    Raises ``InvalidInput`` (field ``key``, ``task_id``, ``task_path``, ``writes``,
    ``writes[i].channel``, ``writes[i].value.type``...), ``PayloadTooLarge``
    (``writes[i].value.data``).
    """
    check_id(session_id, field="session_id")
    check_namespace(checkpoint_ns)
    if (
        not isinstance(task_id, str)
        or not 1 <= len(task_id) <= MAX_TASK_ID_LENGTH
        or not task_id.isprintable()
    ):
        raise InvalidInput(
            f"task_id must be 1 to {MAX_TASK_ID_LENGTH} printable characters.", field="task_id"
        )
    if not isinstance(task_path, str) or len(task_path) > MAX_NAMESPACE_LENGTH or not task_path.isprintable():
        raise InvalidInput(
            f"task_path must be at most {MAX_NAMESPACE_LENGTH} printable characters.", field="task_path"
        )
    if not 1 <= len(writes) <= MAX_WRITES:
        raise InvalidInput(f"writes must hold 1 to {MAX_WRITES} writes.", field="writes")
    for i, write in enumerate(writes):
        if (
            not isinstance(write.channel, str)
            or not 1 <= len(write.channel) <= MAX_CHANNEL_LENGTH
            or not write.channel.isprintable()
        ):
            raise InvalidInput(
                f"channel must be 1 to {MAX_CHANNEL_LENGTH} printable characters.",
                field=f"writes[{i}].channel",
            )
        _check_serialized_type(write.value_type, field=f"writes[{i}].value.type")
        if len(write.value) > MAX_STATE_BYTES:
            raise PayloadTooLarge(
                f"the value is {len(write.value)} bytes; a write allows at most {MAX_STATE_BYTES}.",
                field=f"writes[{i}].value.data",
            )
    overwrite = all(write.channel in SPECIAL_WRITE_CHANNELS for write in writes)
    conflict = (
        "DO UPDATE SET channel = EXCLUDED.channel, value_type = EXCLUDED.value_type, "
        "value = EXCLUDED.value, task_path = EXCLUDED.task_path"
        if overwrite
        else "DO NOTHING"
    )
    rows = [
        (
            session_id,
            agent.pk,
            checkpoint_ns,
            idempotency_key,
            task_id,
            task_path,
            SPECIAL_WRITE_CHANNELS.get(w.channel, i),
            w.channel,
            w.value_type,
            w.value,
        )
        for i, w in enumerate(writes)
    ]
    if overwrite:  # one statement may not update a row twice: the last write to a channel wins
        rows = list({row[6]: row for row in rows}.values())
    now = timezone.now()
    # one statement: which writes were new comes back in RETURNING (xmax = 0: inserted, not updated)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_checkpointwrite (session_id, agent_id, checkpoint_ns, checkpoint_key, "
            "task_id, task_path, idx, channel, value_type, value, created_at) "
            "SELECT s, a, n, k, t, p, i, ch, vt, v, %s FROM unnest(%s::text[], %s::bigint[], %s::text[], "
            "%s::text[], %s::text[], %s::text[], %s::int[], %s::text[], %s::text[], %s::bytea[]) "
            "AS w(s, a, n, k, t, p, i, ch, vt, v) "
            "ON CONFLICT (session_id, agent_id, checkpoint_ns, checkpoint_key, task_id, idx) "
            f"{conflict} RETURNING idx, (xmax = 0)",
            [now, *([list(column) for column in zip(*rows, strict=True)])],
        )
        created = {idx for idx, inserted in cursor.fetchall() if inserted}
    return WritesResult(
        writes=[
            StoredWrite(task_id=task_id, channel=channel, idx=idx, created=idx in created)
            for _, _, _, _, _, _, idx, channel, _, _ in rows
        ],
        created=len(created),
    )


@dataclass(frozen=True)
class ThreadDeleted:
    """What ``checkpoints_delete`` removed from one agent's stream in a session, and the decision
    event that records it (``None`` when there was nothing to delete)."""

    agent: str
    checkpoints: int
    writes: int
    namespaces: list[str]
    event: Event | None


def checkpoints_delete(
    *, agent: Agent, session_id: str, owner_name: str | None = None, may_curate: bool = False
) -> ThreadDeleted:
    """Delete a stream of checkpoints in ``session_id`` (every namespace, with their pending
    writes): LangGraph's ``delete_thread``. The stream is ``agent``'s own, or with ``owner_name``
    that agent's, which needs ``may_curate`` (a key with the ``curate`` scope) unless it names
    ``agent`` itself. The delete is recorded as a ``decision`` event of ``agent`` in the session
    (payload: ``action`` ``checkpoints_deleted``, the stream's ``agent``, the counts and namespaces);
    after the commit the Redis copies of the stream's namespaces are dropped (when Redis cannot be
    reached, this process drops them at its next checkpoint call that reaches it).

    Raises ``InvalidInput`` (bad session id), ``PermissionDenied`` (another agent's stream without
    ``may_curate``), ``NotFound`` (field ``agent``: no such agent in the tenant), ``Conflict``
    (field ``session_id``) when a legal hold covers a checkpoint of the stream: nothing is deleted.
    """
    check_id(session_id, field="session_id")
    owner = agent
    if owner_name is not None and owner_name != agent.name:
        if not may_curate:
            raise PermissionDenied(
                "Checkpoints are per agent: only their agent, or a key with the 'curate' scope, may "
                "delete another agent's checkpoints.",
                field="agent",
            )
        found = Agent.objects.filter(name=owner_name).first()
        if found is None:
            raise NotFound(f"No agent named {owner_name!r}.", field="agent")
        owner = found
    with transaction.atomic():
        advisory_xact_lock("ckpt", session_id, owner.pk)
        ids, namespaces = selectors.checkpoint_stream_ids(agent=owner, session_id=session_id)
        holds_check(layer="checkpoints", rows=Checkpoint.objects.filter(pk__in=ids), field="session_id")
        writes, _ = CheckpointWrite.objects.filter(session_id=session_id, agent=owner).delete()
        if not ids and not writes:
            return ThreadDeleted(agent=owner.name, checkpoints=0, writes=0, namespaces=[], event=None)
        Checkpoint.objects.filter(pk__in=ids).delete()
        event = decision_record(
            agent=agent,
            session_id=session_id,
            content=(
                f"Deleted {len(ids)} checkpoint(s) and {writes} pending write(s) of agent {owner.name} "
                "in this session."
            ),
            payload={
                "action": "checkpoints_deleted",
                "agent": owner.name,
                "checkpoints": len(ids),
                "writes": writes,
                "namespaces": namespaces,
            },
        )
        keys = [cache_key(session_id, owner.pk, ns) for ns in namespaces]

        def drop_copies() -> None:
            if not keys:  # only writes were there: no checkpoint, so no copy
                return
            try:
                get_redis().delete(*keys)
            except redis.RedisError as exc:
                logger.warning("dropping checkpoint copies %s failed: %s", keys, exc)
                for key in keys:  # any cached step is older than this: the next call drops it
                    _remember_stale(key, MAX_STEP_INDEX + 1)

        transaction.on_commit(drop_copies)
    return ThreadDeleted(
        agent=owner.name, checkpoints=len(ids), writes=writes, namespaces=namespaces, event=event
    )
