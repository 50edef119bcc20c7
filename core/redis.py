"""The Redis connection for working memory and checkpoints' hot copies, and tenant-prefixed keys.

Every key starts with ``{<tenant schema>}:``. The braces are a Redis Cluster hash tag: all of one
tenant's keys land in one slot, and two tenants' keys never share a name, whatever ids clients use.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from django.conf import settings

from core.errors import InvalidInput, ServiceUnavailable
from core.tenancy import current_schema

ID_PATTERN = re.compile(r"^[A-Za-z0-9._\-]{1,200}$")
UNAVAILABLE_MESSAGE = "Working memory (Redis) is unavailable right now; retry later."

_clients: dict[str, redis.Redis] = {}
_lock = threading.Lock()


def get_redis() -> redis.Redis:
    """A process-wide client for ``settings.REDIS_URL`` with short timeouts (fail fast, answer 503)."""
    url = settings.REDIS_URL
    client = _clients.get(url)
    if client is None:
        with _lock:
            client = _clients.get(url) or redis.Redis.from_url(
                url, socket_timeout=1.0, socket_connect_timeout=0.5, health_check_interval=15
            )
            _clients[url] = client
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
    """Turn Redis connection failures into ``ServiceUnavailable`` (503)."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ServiceUnavailable(UNAVAILABLE_MESSAGE) from exc
