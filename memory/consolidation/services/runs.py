"""A consolidation job's run: bounded batches under the job's lock, resumed from the run's cursor,
ended ``done`` or ``failed``; and who the trail says acted."""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.utils import timezone

from core.errors import DomainError
from core.tenancy import current_schema

from ..models import ConsolidationRun, RunStatus
from ..selectors import run_unfinished

logger = logging.getLogger(__name__)

ACTOR = "job:consolidation"
TRAIL_SESSION = "consolidation"
# sessions the summary tree leaves out: the jobs' own trail (summarising it would feed itself) and
# the one-object trail sessions of memories and facts ("memory:<id>", "fact:<id>": a forget, a
# retract), which hold a decision or two each and would each cost a summary memory
UNSUMMARISED_SESSIONS = (TRAIL_SESSION,)
UNSUMMARISED_PREFIXES = ("memory:", "fact:")

NIL = uuid.UUID(int=0)  # the cursor before the first memory (ids are UUIDs)


def batch_size(batch: int | None) -> int:
    """Rows per batch: ``batch``, else ``ENGRAM_CONSOLIDATION_BATCH``."""
    return int(batch or settings.ENGRAM["CONSOLIDATION_BATCH"])


def job_key(job: str) -> int:
    """The advisory lock key of (tenant, ``job``): a signed 64-bit integer."""
    digest = hashlib.sha256(f"{current_schema()}:consolidation:{job}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def job_lock(job: str) -> Iterator[bool]:
    """A session advisory lock on (tenant, ``job``): yields False when another run holds it."""
    key = job_key(job)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        got = bool(cursor.fetchone()[0])
    try:
        yield got
    finally:
        if got:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def _run_open(job: str, now: datetime | None) -> ConsolidationRun:
    """The unfinished run of ``job`` to resume (``attempts`` + 1; it keeps its clock), or a new one
    at ``now`` (default: the current time)."""
    run = run_unfinished(job)
    if run is not None:
        run.attempts += 1
        run.save(update_fields=["attempts"])
        logger.info("resuming %s at %s", run, run.cursor)
        return run
    return ConsolidationRun.objects.create(job=job, clock=now or timezone.now())


def counts_add(counts: dict[str, int], **more: int) -> None:
    """Add ``more`` (``name=count``) to the tally ``counts``."""
    for name, value in more.items():
        counts[name] = int(counts.get(name, 0)) + int(value)


def _run_finish(run: ConsolidationRun, *, error: str = "") -> ConsolidationRun:
    run.status = RunStatus.FAILED if error else RunStatus.DONE
    run.error = error
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "finished_at"])
    return run


def run_execute(
    job: str, now: datetime | None, body: Callable[[ConsolidationRun], None]
) -> ConsolidationRun | None:
    """Run ``body`` over the open run of ``job`` under the job's lock; None when another run holds
    the lock. A domain error (a dependency down) ends the run as ``failed`` with its message; any
    other exception too, and is raised again."""
    with job_lock(job) as got:
        if not got:
            logger.info("%s already running in %s", job, current_schema())
            return None
        run = _run_open(job, now)
        try:
            body(run)
        except DomainError as exc:
            return _run_finish(run, error=f"{type(exc).__name__}: {exc.message}")
        except Exception as exc:
            _run_finish(run, error=f"{type(exc).__name__}: {exc}")
            raise
        return _run_finish(run)
