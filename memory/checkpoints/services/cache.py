"""The Redis copy of each checkpoint stream's latest: its key, the scripts that write and drop it,
the tombstones its deleters leave, and the streams this process must drop copies of once Redis
answers again.

A Lua script writes a copy only if the cached step is not newer, so two commits whose after-commit
writes arrive out of order cannot leave an older checkpoint cached. Every delete of checkpoints
drops its streams' copies through ``copies_drop``, which leaves a tombstone beside each copy: the
highest checkpoint id deleted in that stream and namespace (ids come from one sequence, and a save
takes the stream's lock, so a checkpoint saved after the delete has a larger id). The write script
refuses a checkpoint whose id is not above the tombstone, so a re-warm that read the latest before
a delete, or a save's after-commit write, that reaches Redis after the delete cannot cache a
deleted checkpoint (docs/decisions/0117-a-deleted-checkpoint-is-never-cached-again.md).

If a save or a delete commits while Redis is unreachable, Redis may still hold the previous copy
when it comes back (a network split rather than a restart). This process remembers such streams
(at most ``PENDING_LIMIT``) and, at its next checkpoint call that reaches Redis, drops their copies
when older than the saved step, leaving a delete's tombstone, so the next restore reads PostgreSQL.
Another process that never saw the failure could serve the older copy until then, or until the TTL
ends.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import NamedTuple

import redis
from redis.commands.core import Script
from redis.crc import key_slot

from core.redis import get_redis, tenant_key
from core.tenancy import current_tenant

from ..models import MAX_STEP_INDEX

logger = logging.getLogger(__name__)

PENDING_LIMIT = 10_000
DEGRADED_HEADER_VALUE = "redis-unavailable"
COPY_KIND, GONE_KIND = "ckpt", "ckpt-gone"
# A tombstone guards against writes that started before its delete (a re-warm runs once the
# response is sent, a save's write right after its commit): it lives at least a day, and at least
# the tenant's copy TTL.
GONE_TTL_SECONDS = 24 * 3600

# KEYS[1] = cache key, KEYS[2] = its tombstone; ARGV = step, body, ttl seconds, checkpoint id.
# Writes unless the checkpoint was deleted (its id is not above the tombstone's) or a newer step is
# cached; 1 if written.
# registered without a client (``None``): each call passes the client it runs on
_PUT_IF_NOT_NEWER = Script(
    None,  # type: ignore[arg-type]
    b"""
local gone = redis.call('GET', KEYS[2])
if gone and tonumber(gone) >= tonumber(ARGV[4]) then return 0 end
local cached = redis.call('HGET', KEYS[1], 'step')
if cached and tonumber(cached) > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'step', ARGV[1], 'body', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
""",
)
# KEYS[i] = cache key and KEYS[n + i] its tombstone, ARGV[2i - 1] = a step and ARGV[2i] = a
# checkpoint id, for i = 1..n (keys of one hash slot: a Redis Cluster runs a script only over keys
# of one slot); ARGV[2n + 1] = the tombstones' TTL in seconds. Deletes each copy older than its
# step; an id above 0 raises the tombstone to it (never lowers it) and renews its TTL. Returns how
# many copies it deleted.
_DROP_OLDER = Script(
    None,  # type: ignore[arg-type]
    b"""
local n = #KEYS / 2
local ttl = ARGV[2 * n + 1]
local deleted = 0
for i = 1, n do
  local gone = tonumber(ARGV[2 * i])
  if gone > 0 then
    local was = redis.call('GET', KEYS[n + i])
    if was and tonumber(was) > gone then gone = was end
    redis.call('SET', KEYS[n + i], gone, 'EX', ttl)
  end
  local cached = redis.call('HGET', KEYS[i], 'step')
  if cached and tonumber(cached) < tonumber(ARGV[2 * i - 1]) then
    deleted = deleted + redis.call('DEL', KEYS[i])
  end
end
return deleted
""",
)
# copies per call of _DROP_OLDER: a script blocks its Redis while it runs (~1 µs per key)
FLUSH_BATCH = 500
# a step above every step: a deleted stream's copy is older than it, whatever it holds
_ANY_STEP = MAX_STEP_INDEX + 1


class _Drop(NamedTuple):
    """What ``_DROP_OLDER`` does to one copy: drop it when older than ``step``; ``gone`` (0: none)
    the tombstone to leave, for ``ttl`` seconds."""

    step: int
    gone: int = 0
    ttl: int = GONE_TTL_SECONDS


_pending: OrderedDict[str, _Drop] = OrderedDict()
_pending_lock = threading.Lock()


def cache_key(session_id: str, agent_id: int, checkpoint_ns: str = "") -> str:
    """The Redis key of the latest checkpoint of agent ``agent_id`` in the session and namespace
    (current tenant).

    ``{tenant}:ckpt:<session_id>:<agent id>`` for the root namespace ``""``, with
    ``:ns:<SHA-256 of the namespace, 32 hex>`` appended for another (a namespace may hold any
    character): session ids cannot contain ``:``, so keys never collide.
    """
    if not checkpoint_ns:
        return tenant_key(COPY_KIND, session_id, agent_id)
    return tenant_key(
        COPY_KIND, session_id, agent_id, "ns", hashlib.sha256(checkpoint_ns.encode()).hexdigest()[:32]
    )


def gone_key(key: str) -> str:
    """The tombstone of the copy under ``key`` (a ``cache_key``): ``{tenant}:ckpt-gone:...`` with the
    copy's rest, so under the same hash tag (one slot) and of a kind of its own (bookkeeping: it
    holds a checkpoint id, never data)."""
    tag, _, rest = key.partition(f":{COPY_KIND}:")
    return f"{tag}:{GONE_KIND}:{rest}"


def _gone_ttl() -> int:
    """The tombstones' TTL in seconds: ``GONE_TTL_SECONDS``, or the current tenant's copy TTL if longer."""
    return max(GONE_TTL_SECONDS, getattr(current_tenant(), "checkpoint_cache_ttl_seconds", 0))


def _remember(key: str, drop: _Drop) -> None:
    with _pending_lock:
        was = _pending.get(key, drop)
        _pending[key] = _Drop(max(drop.step, was.step), max(drop.gone, was.gone), max(drop.ttl, was.ttl))
        _pending.move_to_end(key)
        while len(_pending) > PENDING_LIMIT:
            _pending.popitem(last=False)


def remember_stale(key: str, step_index: int) -> None:
    """Remember that the copy under ``key`` is older than ``step_index`` (saved while Redis could
    not be reached): ``flush_pending`` drops it at the next call that reaches Redis."""
    _remember(key, _Drop(step_index))


def _drop(client: redis.Redis, batch: list[tuple[str, _Drop]]) -> None:
    """One ``_DROP_OLDER`` call over ``batch`` (keys of one slot). Raises RedisError."""
    args: list[int] = [n for _, drop in batch for n in (drop.step, drop.gone)]
    keys = [key for key, _ in batch] + [gone_key(key) for key, _ in batch]
    _DROP_OLDER(keys=keys, args=[*args, max(drop.ttl for _, drop in batch)], client=client)


def _drop_by_slot(client: redis.Redis, items: list[tuple[str, _Drop]], done: bool = False) -> None:
    """``_drop`` over ``items``, one call per hash slot and at most ``FLUSH_BATCH`` copies; with
    ``done``, forgets the pending entries of each batch as its call returns. Raises RedisError."""
    by_slot: dict[int, list[tuple[str, _Drop]]] = {}
    for key, drop in items:
        by_slot.setdefault(key_slot(key.encode()), []).append((key, drop))
    for group in by_slot.values():
        for start in range(0, len(group), FLUSH_BATCH):
            batch = group[start : start + FLUSH_BATCH]
            _drop(client, batch)
            if done:
                with _pending_lock:
                    for key, drop in batch:
                        if _pending.get(key) == drop:  # not remembered again meanwhile
                            del _pending[key]


def flush_pending(client: redis.Redis) -> None:
    """Drop cached copies older than checkpoints saved, or deleted, while Redis was unreachable,
    leaving the deletes' tombstones. Raises RedisError.

    One script call per hash slot (the tenant's hash tag: one slot per tenant) and at most
    ``FLUSH_BATCH`` keys: a Redis Cluster runs a script only over keys of one slot, and refuses
    scripts in its pipelines. Keys flushed are forgotten as each call returns, so a failure part way
    leaves only the rest pending."""
    if not _pending:  # the common case: no lock, no round trip
        return
    with _pending_lock:
        items = list(_pending.items())
    _drop_by_slot(client, items, done=True)


def copies_drop(gone: Mapping[str, int]) -> bool:
    """Drop the copies of streams whose checkpoints were deleted: ``gone`` maps a ``cache_key`` to
    the highest checkpoint id deleted in that stream and namespace (current tenant). Each copy is
    deleted, whatever it holds, and a tombstone with that id (kept if higher) stays beside it for
    ``_gone_ttl()`` seconds, so no write of a checkpoint deleted can cache it again
    (``cache_put``). Every path that deletes checkpoints calls this, after its commit.

    ``False`` when Redis could not be used: this process then does the same at its next checkpoint
    call that reaches Redis (``flush_pending``)."""
    if not gone:
        return True
    ttl = _gone_ttl()
    items = [(key, _Drop(_ANY_STEP, checkpoint_id, ttl)) for key, checkpoint_id in gone.items()]
    try:
        client = get_redis()
        flush_pending(client)
        _drop_by_slot(client, items)
    except redis.RedisError as exc:
        logger.warning("dropping checkpoint copies %s failed: %s", sorted(gone), exc)
        for key, drop in items:
            _remember(key, drop)
        return False
    return True


def cache_put(*, key: str, checkpoint_id: int, step_index: int, body: bytes, ttl_seconds: int) -> bool:
    """Write the copy of checkpoint ``checkpoint_id`` unless a newer one is cached or the checkpoint
    was deleted (its stream's tombstone is not below its id: ``copies_drop``); ``False`` when Redis
    could not be used."""
    try:
        client = get_redis()
        flush_pending(client)
        _PUT_IF_NOT_NEWER(
            keys=[key, gone_key(key)], args=[step_index, body, ttl_seconds, checkpoint_id], client=client
        )
    except redis.RedisError as exc:
        logger.warning("checkpoint cache write for %s failed: %s", key, exc)
        return False
    return True
