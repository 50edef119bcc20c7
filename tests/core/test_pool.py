"""Closing a connection pool closes every connection given back to it: a test run's database can be
dropped right after the pool closes ("database ... is being accessed by other users" otherwise)."""

from __future__ import annotations

import threading
import time

import psycopg
from django.db import connection

from core.db.availability import GuardedPool


def test_closing_the_pool_closes_a_connection_whose_return_was_still_queued(db) -> None:  # type: ignore[no-untyped-def]
    # psycopg's pool gives a connection back through a worker thread (its reset); a return still
    # queued when the pool closes is dropped by the worker, and the connection with it, left open
    params = connection.get_connection_params()
    kwargs = {
        name: params[name] for name in ("dbname", "host", "port", "user", "password") if params.get(name)
    }
    resetting = threading.Event()
    go_on = threading.Event()

    def slow_reset(conn: psycopg.Connection) -> None:
        resetting.set()
        go_on.wait(10)

    pool = GuardedPool(kwargs=kwargs, min_size=0, max_size=2, num_workers=1, reset=slow_reset, open=True)
    first, second = pool.getconn(), pool.getconn()
    pool.putconn(first)  # the one worker is busy resetting it...
    assert resetting.wait(10)
    pool.putconn(second)  # ...while the return of this one waits in the queue
    closing = threading.Thread(target=pool.close)
    closing.start()
    deadline = time.monotonic() + 10
    while not pool.closed and time.monotonic() < deadline:
        time.sleep(0.01)
    go_on.set()
    closing.join(10)
    assert first.closed
    assert second.closed, "the pool closed and left a connection given back to it open"
