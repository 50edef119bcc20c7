"""``EngramClient`` (sync) and ``AsyncEngramClient`` (asyncio) over httpx.

Both send ``Authorization: Bearer <api key>``, turn error answers into ``EngramError`` subclasses
(with the API's ``code`` and ``errors``), and retry what is safe to retry: a connection error or a
502/503/504, up to ``RetryPolicy.attempts`` times with exponential backoff. Every POST carries an
``Idempotency-Key`` (one per call, the same on each retry), so a retried write is applied once:
the server replays its first answer. Every operation of the API is a method of both (declared once
in ``operations.py``); list operations come as iterators over the cursor pages. ``send(Call(...))``
stays available for a raw call.
"""

from __future__ import annotations

from ._call import RETRY_STATUSES, AsyncCaller, Call, RetryPolicy, SyncCaller
from ._call import segment as _segment
from .operations import Operations

__all__ = ["RETRY_STATUSES", "AsyncEngramClient", "Call", "EngramClient", "RetryPolicy", "_segment"]


class EngramClient(SyncCaller, Operations):
    """A synchronous client of one Engram server as one agent (its API key).

    ``base_url`` is the server (``http://127.0.0.1:8000``: the key names the tenant, so any host
    name that reaches the server will do); ``timeout`` in seconds; ``retry`` a ``RetryPolicy``;
    ``transport`` is httpx's (tests, proxies). Use as a context manager, or call ``close()``.
    """


class AsyncEngramClient(AsyncCaller, Operations):
    """The asyncio twin of ``EngramClient``: the same operations, awaited; lists and streams as
    async iterators. Use with ``async with``, or await ``aclose()``."""
