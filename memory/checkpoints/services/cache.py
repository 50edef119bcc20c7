"""The Redis copy of each checkpoint stream's latest: its key, the scripts that write and drop it,
and the streams this process must drop copies of once Redis answers again.

A Lua script writes a copy only if the cached step is not newer, so two commits whose after-commit
writes arrive out of order cannot leave an older checkpoint cached. If a save commits while Redis
is unreachable, Redis may still hold the previous checkpoint when it comes back (a network split
rather than a restart). This process remembers such streams (at most ``PENDING_LIMIT``) and, at its
next checkpoint call that reaches Redis, drops their copies when older than the saved step, so the
next restore reads PostgreSQL. Another process that never saw the failure could serve the older
copy until then, or until the TTL ends.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict

import redis
from redis.commands.core import Script
from redis.crc import key_slot

from core.redis import get_redis, tenant_key

logger = logging.getLogger(__name__)

PENDING_LIMIT = 10_000
DEGRADED_HEADER_VALUE = "redis-unavailable"

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


def remember_stale(key: str, step_index: int) -> None:
    """Remember that the copy under ``key`` is older than ``step_index`` (saved while Redis could
    not be reached): ``flush_pending`` drops it at the next call that reaches Redis."""
    with _pending_lock:
        _pending[key] = max(step_index, _pending.get(key, step_index))
        _pending.move_to_end(key)
        while len(_pending) > PENDING_LIMIT:
            _pending.popitem(last=False)


def flush_pending(client: redis.Redis) -> None:
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


def cache_put(*, key: str, step_index: int, body: bytes, ttl_seconds: int) -> bool:
    """Write the copy unless a newer one is cached; ``False`` when Redis could not be used."""
    try:
        client = get_redis()
        flush_pending(client)
        _PUT_IF_NOT_NEWER(keys=[key], args=[step_index, body, ttl_seconds], client=client)
    except redis.RedisError as exc:
        logger.warning("checkpoint cache write for %s failed: %s", key, exc)
        return False
    return True
