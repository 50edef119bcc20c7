"""A task that takes a while, for the Celery warm shutdown test (tests/core/test_operations.py),
loaded by that test's own worker (``--include``)."""

from __future__ import annotations

import time

from celery import shared_task

from core.redis import get_redis


@shared_task
def sleep_then_mark(key: str, seconds: float) -> str:
    """Mark ``key`` in Redis ``started``, sleep ``seconds``, then mark it ``finished``."""
    get_redis().set(key, "started", ex=600)
    time.sleep(seconds)
    get_redis().set(key, "finished", ex=600)
    return "finished"
