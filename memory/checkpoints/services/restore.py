"""Restoring an agent's latest checkpoint: Redis first (one ``HGET``); on a miss, PostgreSQL (one
statement), then the copy is re-warmed, or, for a caller that answers first, after its answer is
sent (``defer_rewarm``). When Redis cannot be reached, the answer comes from PostgreSQL and says so
(``degraded``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import redis

from agents.models import Agent
from core.metrics import record_lookup
from core.redis import check_id, get_redis
from tenants.models import WorkingMemoryPolicy

from .. import selectors
from .cache import cache_key, cache_put, flush_pending
from .checks import check_namespace

logger = logging.getLogger(__name__)

Source = Literal["redis", "postgres"]


@dataclass(frozen=True)
class Restored:
    """The latest checkpoint of a session as the JSON document bytes (``None``: the session has none).

    ``source`` says which store answered; ``degraded`` that Redis could not be reached (or, for a
    re-warm run before answering, re-warmed). ``rewarm``: the deferred re-warm of the Redis copy
    (``checkpoint_latest`` with ``defer_rewarm``, a PostgreSQL answer with Redis reachable), to run
    once the answer is sent; it answers ``False`` when Redis could not be used. ``None`` otherwise.
    """

    body: bytes | None
    source: Source
    degraded: bool = False
    rewarm: Callable[[], bool] | None = field(default=None, compare=False, repr=False)

    def data(self) -> dict[str, Any] | None:
        """The document parsed (see ``Checkpoint.document``)."""
        return None if self.body is None else json.loads(self.body)


def checkpoint_latest(
    *,
    agent: Agent,
    session_id: str,
    policy: WorkingMemoryPolicy,
    checkpoint_ns: str = "",
    defer_rewarm: bool = False,
) -> Restored:
    """``agent``'s latest checkpoint in ``session_id`` and namespace ``checkpoint_ns`` ("" the root)
    (current tenant), from Redis or else PostgreSQL.

    Only ``agent``'s own stream is read: another agent's checkpoints in the session are never
    returned (``body`` is ``None`` when ``agent`` saved none there). A Redis miss reads PostgreSQL
    and re-warms Redis (TTL ``policy.checkpoint_cache_ttl_seconds``) before returning, or, with
    ``defer_rewarm``, leaves the re-warm to the caller as ``Restored.rewarm``, to run once it has
    answered (the API runs it after the response is sent): the answer then waits for one Redis
    round trip and one PostgreSQL statement only, and ``degraded`` reports the read alone. The copy
    is written unless a newer step is cached or the checkpoint was deleted meanwhile
    (``cache.cache_put``), so a re-warm that runs late never replaces a newer save's copy nor
    caches a checkpoint a thread delete, a retention sweep or an erasure removed after the read. When Redis cannot be reached the answer comes from PostgreSQL with
    ``degraded=True`` and there is no re-warm. Counts one ``checkpoint`` lookup for ``agent``: a hit
    when Redis answered, else a miss.
    An agent acting for one end user reads PostgreSQL only (the Redis copy is the stream's latest,
    whoever it is about): the latest checkpoint of its subject or of none (``agents.subjects``).
    Raises ``InvalidInput`` for a malformed session id or namespace.
    """
    check_id(session_id, field="session_id")
    check_namespace(checkpoint_ns)
    if agent.acting_for:
        found = selectors.checkpoint_latest_document(
            agent=agent, session_id=session_id, checkpoint_ns=checkpoint_ns
        )
        return Restored(body=None if found is None else found.body, source="postgres")
    key = cache_key(session_id, agent.pk, checkpoint_ns)
    degraded = False
    try:
        client = get_redis()
        flush_pending(client)
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
    if stored is None or degraded:  # Redis just failed: do not wait for it a second time
        return Restored(body=None if stored is None else stored.body, source="postgres", degraded=degraded)
    pk, step, body = stored
    rewarm = partial(
        cache_put,
        key=key,
        checkpoint_id=pk,
        step_index=step,
        body=body,
        ttl_seconds=policy.checkpoint_cache_ttl_seconds,
    )
    if defer_rewarm:
        return Restored(body=body, source="postgres", rewarm=rewarm)
    return Restored(body=body, source="postgres", degraded=not rewarm())
