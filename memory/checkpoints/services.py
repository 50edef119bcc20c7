"""Saving and restoring checkpoints: PostgreSQL is the record, Redis the hot copy of each stream's latest.

Who may write and read: checkpoints are per agent within a session. A session is shared by the
agents of a multi-agent system (their events carry the same ``session_id``), so each agent has its
own checkpoint stream in it: step order, idempotency keys, the listing, the latest and one step are
all scoped to (session, calling agent). An agent can neither write into nor read another agent's
stream (checkpoints are private state, like the scratchpad); saving into a session another agent
uses starts the caller's own stream and never changes what that agent restores.

Save: one transaction per checkpoint, serialised per (session, agent) by a transaction-level
advisory lock; after the commit (``transaction.on_commit``) the checkpoint's JSON document goes to
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

import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

import redis
from django.db import transaction
from redis.commands.core import Script

from agents.models import Agent
from core.canonical_json import contains_nul
from core.errors import Conflict, InvalidInput, PayloadTooLarge
from core.locks import advisory_xact_lock
from core.metrics import record_lookup
from core.redis import check_id, get_redis, tenant_key
from tenants.models import WorkingMemoryPolicy

from . import selectors
from .models import MAX_SCHEMA_VERSION, MAX_STEP_INDEX, Checkpoint, checkpoint_fingerprint

logger = logging.getLogger(__name__)

MAX_STATE_BYTES = (
    1024 * 1024
)  # 1 MiB of JSON (UTF-8): larger state belongs in semantic memory or a blob store
MAX_PLAN_BYTES = 256 * 1024
MAX_KEY_LENGTH = 255
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
# KEYS[1] = cache key; ARGV[1] = step. Deletes the copy when it is older than that step.
_DELETE_IF_OLDER = Script(
    None,  # type: ignore[arg-type]
    b"""
local cached = redis.call('HGET', KEYS[1], 'step')
if cached and tonumber(cached) < tonumber(ARGV[1]) then return redis.call('DEL', KEYS[1]) end
return 0
""",
)

_pending: OrderedDict[str, int] = OrderedDict()
_pending_lock = threading.Lock()


@dataclass
class SaveResult:
    """What ``checkpoint_save`` did.

    ``replayed``: the idempotency key was already used with the same body; ``checkpoint`` is the
    stored one. ``cached``: ``True`` once Redis holds the copy, ``False`` when Redis could not be
    reached after the commit, ``None`` for a replay or while an outer transaction has not committed.
    """

    checkpoint: Checkpoint
    replayed: bool
    cached: bool | None = None

    @property
    def degraded(self) -> bool:
        """Saved in PostgreSQL, but the Redis copy could not be written."""
        return self.cached is False


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


def cache_key(session_id: str, agent_id: int) -> str:
    """The Redis key of the latest checkpoint of agent ``agent_id`` in the session (current tenant).

    ``{tenant}:ckpt:<session_id>:<agent id>``: session ids cannot contain ``:``, so keys never collide.
    """
    return tenant_key("ckpt", session_id, agent_id)


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _check_input(
    *, session_id: str, step_index: int, idempotency_key: str, state: Any, plan: Any, schema_version: int
) -> None:
    check_id(session_id, field="session_id")
    if (
        not isinstance(idempotency_key, str)
        or not 1 <= len(idempotency_key) <= MAX_KEY_LENGTH
        or not idempotency_key.isprintable()
    ):
        raise InvalidInput(
            f"idempotency_key must be 1 to {MAX_KEY_LENGTH} printable characters.", field="idempotency_key"
        )
    if (
        isinstance(step_index, bool)
        or not isinstance(step_index, int)
        or not 0 <= step_index <= MAX_STEP_INDEX
    ):
        raise InvalidInput(f"step_index must be an integer from 0 to {MAX_STEP_INDEX}.", field="step_index")
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
    for name, value, limit in (("state", state, MAX_STATE_BYTES), ("plan", plan, MAX_PLAN_BYTES)):
        if contains_nul(value):
            raise InvalidInput(f"{name} must not contain NUL characters.", field=name)
        size = _json_size(value)
        if size > limit:
            raise PayloadTooLarge(
                f"{name} is {size} bytes of JSON; a checkpoint allows at most {limit} bytes. Keep large "
                "material in semantic memory and reference it from the state.",
                field=name,
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
    """Drop cached copies older than checkpoints saved while Redis was unreachable. Raises RedisError."""
    if not _pending:  # the common case: no lock, no round trip
        return
    with _pending_lock:
        items = list(_pending.items())
    pipe = client.pipeline(transaction=False)
    for key, step in items:
        _DELETE_IF_OLDER(keys=[key], args=[step], client=pipe)
    pipe.execute()
    with _pending_lock:
        for key, step in items:
            if _pending.get(key) == step:
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
    step_index: int,
    idempotency_key: str,
    state: dict[str, Any],
    plan: list[Any],
    schema_version: int = 1,
    policy: WorkingMemoryPolicy,
    data_subject: str = "",
) -> SaveResult:
    """Store ``agent``'s checkpoint of ``session_id`` after step ``step_index`` in the current tenant.

    The checkpoint joins ``agent``'s own stream in the session: step order and idempotency keys are
    checked against that stream only, and other agents' checkpoints in the session are never read
    or changed. ``state`` is a JSON object of at most ``MAX_STATE_BYTES`` (1 MiB) as UTF-8 JSON, ``plan`` a JSON
    list of at most ``MAX_PLAN_BYTES``. After the commit, the checkpoint is cached in Redis for
    ``policy.checkpoint_cache_ttl_seconds``; a Redis failure then only sets ``cached=False``.

    ``data_subject``: the person the state is about (what erasures and holds target), or "".

    Returns a ``SaveResult``: a new checkpoint, or the stored one (``replayed=True``) when this
    ``idempotency_key`` was already used by ``agent`` in the session with the same body.

    Raises ``InvalidInput`` (bad ids or types, NUL characters), ``PayloadTooLarge`` (field ``state``
    or ``plan``), ``Conflict`` with field ``idempotency_key`` (the key was used with another body)
    or ``step_index`` (not greater than the latest step of ``agent`` in the session, which the
    message gives).
    """
    _check_input(
        session_id=session_id,
        step_index=step_index,
        idempotency_key=idempotency_key,
        state=state,
        plan=plan,
        schema_version=schema_version,
    )
    fingerprint = checkpoint_fingerprint(
        step_index=step_index, state=state, plan=plan, schema_version=schema_version
    )
    with transaction.atomic():
        advisory_xact_lock("ckpt", session_id, agent.pk)
        latest, by_key = selectors.checkpoint_stream_head(
            agent=agent, session_id=session_id, idempotency_key=idempotency_key
        )
        existing = (
            None
            if by_key is None
            else selectors.checkpoint_by_key(
                agent=agent, session_id=session_id, idempotency_key=idempotency_key
            )
        )
        if existing is not None:
            if existing.fingerprint != fingerprint:
                differing = _differing_fields(
                    existing, step_index=step_index, state=state, plan=plan, schema_version=schema_version
                )
                raise Conflict(
                    f"idempotency_key {idempotency_key!r} was already used by you in this session for step "
                    f"{existing.step_index} with a different body (differs in: {', '.join(differing)}).",
                    field="idempotency_key",
                )
            return SaveResult(checkpoint=existing, replayed=True)

        if latest is not None and step_index <= latest:
            raise Conflict(
                f"step_index {step_index} is not after your latest checkpoint in this session, step "
                f"{latest}; send a step_index greater than {latest}.",
                field="step_index",
            )
        checkpoint = Checkpoint(
            session_id=session_id,
            step_index=step_index,
            idempotency_key=idempotency_key,
            state=state,
            plan=plan,
            schema_version=schema_version,
            agent=agent,
            fingerprint=fingerprint,
            data_subject=data_subject,
        )
        # uniqueness is what the advisory lock and the checks above decide (constraints are the
        # backstop); the agent is the caller itself, so its foreign key needs no query to validate
        checkpoint.full_clean(exclude=["agent"], validate_unique=False, validate_constraints=False)
        checkpoint.save()

        result = SaveResult(checkpoint=checkpoint, replayed=False)
        key, body, ttl = (
            cache_key(session_id, agent.pk),
            checkpoint.document_json(),
            policy.checkpoint_cache_ttl_seconds,
        )

        def cache_after_commit() -> None:
            result.cached = _cache_put(key=key, step_index=step_index, body=body, ttl_seconds=ttl)
            if not result.cached:
                _remember_stale(key, step_index)

        transaction.on_commit(cache_after_commit)
    return result


def checkpoint_latest(*, agent: Agent, session_id: str, policy: WorkingMemoryPolicy) -> Restored:
    """``agent``'s latest checkpoint in ``session_id`` (current tenant), from Redis or else PostgreSQL.

    Only ``agent``'s own stream is read: another agent's checkpoints in the session are never
    returned (``body`` is ``None`` when ``agent`` saved none there). A Redis miss reads PostgreSQL and re-warms Redis (TTL ``policy.checkpoint_cache_ttl_seconds``);
    when Redis cannot be reached the answer comes from PostgreSQL with ``degraded=True``. Counts one
    ``checkpoint`` lookup for ``agent``: a hit when Redis answered, else a miss.
    Raises ``InvalidInput`` for a malformed session id.
    """
    check_id(session_id, field="session_id")
    key = cache_key(session_id, agent.pk)
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

    checkpoint = selectors.checkpoint_latest_stored(agent=agent, session_id=session_id)
    if checkpoint is None:
        return Restored(body=None, source="postgres", degraded=degraded)
    body = checkpoint.document_json()
    if not degraded:  # Redis just failed: do not wait for it a second time
        degraded = not _cache_put(
            key=key,
            step_index=checkpoint.step_index,
            body=body,
            ttl_seconds=policy.checkpoint_cache_ttl_seconds,
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
            .values_list("pk", "session_id", "agent_id")
        )
        Checkpoint.objects.filter(pk__in=[r[0] for r in rows]).delete()
    keys = sorted({cache_key(session_id, agent_id) for _, session_id, agent_id in rows})
    if keys:
        try:
            get_redis().delete(*keys)
        except redis.RedisError as exc:
            raise ServiceUnavailable(f"Redis cannot be reached to drop checkpoint copies: {exc}") from exc
    return sorted(r[0] for r in rows), keys
