"""The Redis connection for working memory and checkpoints' hot copies, and tenant-prefixed keys.

Every key starts with ``{<tenant schema>}:``. The braces are a Redis Cluster hash tag: all of one
tenant's keys land in one slot, and two tenants' keys never share a name, whatever ids clients use.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException
from redis.retry import Retry

from core.errors import InvalidInput, ServiceUnavailable
from core.tenancy import current_schema

ID_PATTERN = re.compile(r"^[A-Za-z0-9._\-]{1,200}$")
UNAVAILABLE_MESSAGE = "Working memory (Redis) is unavailable right now; retry later."

_clients: dict[tuple[str, bool], redis.Redis] = {}
_lock = threading.Lock()


class _Cluster(RedisCluster):
    """``RedisCluster`` whose "cannot reach the cluster" errors raise ``redis.ConnectionError``.

    redis-py raises its ``RedisClusterException`` (not a ``RedisError``) when no node answers, so
    callers that degrade on ``RedisError`` (checkpoints' restore from PostgreSQL) or answer 503 on a
    connection error would see a 500 instead.
    """

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().execute_command(*args, **kwargs)
        except RedisClusterException as exc:
            raise redis.ConnectionError(f"Redis Cluster: {exc}") from exc


def _connect(url: str, cluster: bool) -> redis.Redis:
    if not cluster:
        return redis.Redis.from_url(
            url, socket_timeout=1.0, socket_connect_timeout=0.5, health_check_interval=15
        )
    # RedisCluster offers the commands of redis.Redis (same mixins), pipelines (MULTI when all keys
    # share a slot) and scripts; it is typed apart, hence the cast. One attempt per node on a
    # connection error (its default retries for 3 s), so a cluster that is down is a fast 503 too.
    try:
        client = _Cluster.from_url(
            url,
            socket_timeout=1.0,
            socket_connect_timeout=0.5,
            health_check_interval=15,
            retry=Retry(NoBackoff(), 1),
        )
    except RedisClusterException as exc:  # no startup node answered
        raise redis.ConnectionError(f"Redis Cluster: {exc}") from exc
    return cast(redis.Redis, client)


def get_redis() -> redis.Redis:
    """A process-wide client for ``settings.REDIS_URL`` with short timeouts (fail fast, answer 503):
    a ``RedisCluster`` when ``settings.REDIS_CLUSTER`` is on (see the module docstring)."""
    key = (settings.REDIS_URL, bool(getattr(settings, "REDIS_CLUSTER", False)))
    client = _clients.get(key)
    if client is None:
        with _lock:
            client = _clients.get(key) or _connect(*key)
            _clients[key] = client
    return client


def check_id(value: str, *, field: str) -> str:
    """Validate a client-chosen id used inside a key: 1-200 of ``A-Z a-z 0-9 . _ -``."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise InvalidInput(
            f"{field} must be 1-200 characters of letters, digits, '.', '_' or '-'.", field=field
        )
    return value


def tenant_key(*parts: str | int) -> str:
    """``{schema}:part1:part2...`` for the tenant active on the connection."""
    return "{" + current_schema() + "}:" + ":".join(str(p) for p in parts)


@contextmanager
def redis_errors() -> Iterator[None]:
    """Turn Redis connection failures into ``ServiceUnavailable`` (503); on a cluster also a pipeline
    that finds no node (``RedisClusterException``, which is not a ``RedisError``)."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError, RedisClusterException) as exc:
        raise ServiceUnavailable(UNAVAILABLE_MESSAGE) from exc
