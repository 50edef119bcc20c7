"""The recall-touch buffer: which memories a recall reached, and when, waiting to restart their clocks.

A recall restarts the recency clock of every memory it returns (``services.clocks.accesses_touch``). Doing
that in PostgreSQL on the request path costs an UPDATE and a commit per search; instead the search
appends one entry to the tenant's Redis stream ``{<schema>}:semantic:touches`` (fields ``at``, epoch
seconds; ``agent``, the recalling agent's id; ``ids``, the memory ids comma-separated) and the
worker applies the entries in batches (``services.clocks.accesses_flush``, task
``memory.semantic.tasks.touches_flush``).

Delivery uses a Redis consumer group (``XREADGROUP``), so an entry read by a flush stays *pending*
until that flush's transaction has committed and acknowledged it (``XACK`` + ``XDEL``): a worker
killed in between leaves its entries pending and the next flush reads them again first (flushes of
one tenant take turns under an advisory lock, so pending entries are never another flush's work in
progress). What survives a restart is what Redis keeps: with the default configuration (RDB
snapshots, no AOF) a Redis crash loses the entries appended since its last snapshot; with
``appendonly yes`` (``appendfsync everysec``) at most the last second of them.

The first push after each quiet period also says a flush should be scheduled (``SET NX EX``
of ``{<schema>}:semantic:touches:scheduled`` in the same round trip as the ``XADD``): one task per
tenant per ``delay`` seconds, not one per search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis

from core.redis import get_redis, tenant_key

GROUP = "flush"
CONSUMER = "flush"  # one consumer: flushes of a tenant take turns (an advisory lock), see the module
# A stream longer than this is trimmed (oldest first, approximately): a worker stopped for days must
# not let Redis grow without bound; the clocks of the trimmed recalls stay as they were.
MAX_ENTRIES = 1_000_000


@dataclass(frozen=True)
class Touch:
    """One buffered recall: ``entry`` (the stream id), ``at`` (aware UTC), the recalling ``agent_id``
    and the memory ids it returned (strings)."""

    entry: str
    at: datetime
    agent_id: int
    ids: tuple[str, ...]


def _stream() -> str:
    return tenant_key("semantic", "touches")


def touches_push(*, ids: Sequence[Any], at: datetime, agent_id: int, delay: float) -> bool:
    """Append one recall of ``ids`` at ``at`` by ``agent_id`` to the current tenant's stream, in one
    Redis round trip. Returns True when no flush is scheduled for the next ``delay`` seconds (the
    caller queues one). Raises ``redis.RedisError`` when Redis cannot be reached (the caller falls
    back to touching PostgreSQL at once)."""
    stream = _stream()
    pipe = get_redis().pipeline(transaction=False)
    pipe.xadd(
        stream,
        {"at": repr(at.timestamp()), "agent": str(agent_id), "ids": ",".join(str(i) for i in ids)},
        maxlen=MAX_ENTRIES,
        approximate=True,
    )
    pipe.set(f"{stream}:scheduled", "1", nx=True, px=max(1, int(delay * 1000)))
    return bool(pipe.execute()[1])


def _ensure_group(client: redis.Redis, stream: str) -> None:
    try:
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def _parse(entries: Any) -> list[Touch]:
    out = []
    for entry, fields in entries or ():
        if not fields:  # deleted while pending
            continue
        ids = fields.get(b"ids", b"").decode()
        out.append(
            Touch(
                entry=entry.decode(),
                at=datetime.fromtimestamp(float(fields[b"at"]), tz=UTC),
                agent_id=int(fields[b"agent"]),
                ids=tuple(i for i in ids.split(",") if i),
            )
        )
    return out


def touches_read(*, count: int) -> list[Touch]:
    """Up to ``count`` buffered recalls of the current tenant, oldest first: first those a flush read
    and never acknowledged (it died), then new ones. Call while holding the tenant's flush lock."""
    client = get_redis()
    stream = _stream()
    _ensure_group(client, stream)
    pending: Any = client.xreadgroup(GROUP, CONSUMER, {stream: "0"}, count=count)
    touches = _parse(pending[0][1]) if pending else []
    if len(touches) < count:
        fresh: Any = client.xreadgroup(GROUP, CONSUMER, {stream: ">"}, count=count - len(touches))
        touches += _parse(fresh[0][1]) if fresh else []
    return touches


def touches_ack(entries: Sequence[str]) -> None:
    """Acknowledge and delete applied entries (after the transaction that applied them committed)."""
    if not entries:
        return
    stream = _stream()
    pipe = get_redis().pipeline(transaction=True)
    pipe.xack(stream, GROUP, *entries)
    pipe.xdel(stream, *entries)
    pipe.execute()


def touches_waiting() -> bool:
    """Whether the current tenant has buffered recalls (new or pending) not yet applied."""
    return bool(get_redis().xlen(_stream()))
