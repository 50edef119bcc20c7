"""Where a request's time goes: wall-clock seconds per account (``db``, ``embed``), summed over the
request into its access log line (``api.ops.RequestContextMiddleware``: ``db_ms``, ``embed_ms``)
and over the process into ``engram_spent_seconds_total{account}``.

``ledger()`` opens the accounts of one unit of work (a request) in a context variable; ``spent(name)``
adds the time of its block to the counter and to ``name`` in the open ledger. A block run on another
thread (an executor's) reaches the counter only: a context variable does not follow
``ThreadPoolExecutor.submit``. ``db_timer`` is a Django ``execute_wrapper`` that puts
every statement Django sends into ``db`` (the round trip: network, waiting for and running the
statement, reading the rows). Not counted: taking a connection from the pool, and the role and
search-path statement the tenant backend sends before a unit's first query (``core.db``).
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from prometheus_client import Counter

P = ParamSpec("P")
R = TypeVar("R")

#: seconds per account of the unit of work this thread or task is serving; None outside one
SPENT = Counter(
    "engram_spent_seconds",
    "Wall-clock seconds spent in PostgreSQL statements of requests (db) and in the embedding model "
    "(embed), by account (core.timing).",
    ["account"],
)
_LEDGER: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar(
    "engram_ledger", default=None
)


@contextmanager
def ledger() -> Iterator[dict[str, float]]:
    """Open the accounts of a unit of work: the dict (account -> seconds) the block's ``spent``
    calls add to; the previous ledger (if any) comes back after."""
    accounts: dict[str, float] = {}
    token = _LEDGER.set(accounts)
    try:
        yield accounts
    finally:
        _LEDGER.reset(token)


@contextmanager
def spent(account: str) -> Iterator[None]:
    """Add the wall-clock seconds of the block (also when it raises) to ``account``: to its counter,
    and to the open ledger when there is one."""
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds = time.perf_counter() - started
        SPENT.labels(account).inc(seconds)
        accounts = _LEDGER.get()
        if accounts is not None:
            accounts[account] = accounts.get(account, 0.0) + seconds


def timed(account: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function so each call's time goes to ``account`` (``spent``)."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with spent(account):
                return function(*args, **kwargs)

        return wrapper

    return decorate


def db_timer(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    """A Django ``execute_wrapper``: the statement's round trip goes to the ``db`` account."""
    with spent("db"):
        return execute(sql, params, many, context)
