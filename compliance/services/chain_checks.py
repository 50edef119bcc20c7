"""Chain checks: queued by a person or run on a schedule, verifying the tenant's trail and its
anchors (``compliance.verification``) in full or incrementally."""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core.errors import NotFound, ServiceUnavailable
from core.locks import advisory_xact_lock
from core.tasks import queue_on_commit
from core.tenancy import current_schema
from memory.episodic.models import Event

from ..models import ChainCheck, CheckScope, CheckStatus
from ..verification import Segment, sink_records, trail_verify
from .anchors import anchor_sink_file

logger = logging.getLogger(__name__)


SCHEDULED_CHECK_JOB = "job:scheduled-verify"
SCHEDULED_CHECKS_KEPT_DAYS = 7  # intact incremental checks kept in the history


def chain_check_request(*, requested_by: str, scope: str = CheckScope.FULL) -> ChainCheck:
    """Queue a verification of the current tenant's trail (``compliance.tasks.chain_check``) for
    ``requested_by`` (``user:<name>`` or ``job:<name>``); ``scope`` full (every event) or
    incremental (see ``chain_check_run``). Returns the queued check."""
    with transaction.atomic():
        check = ChainCheck.objects.create(requested_by=requested_by, scope=scope)
        queue_on_commit("compliance.tasks.chain_check", check.pk)
    return check


@dataclass(frozen=True)
class _Plan:
    """What a check verifies: ``segments`` of the chain, the first new event ``from_seq``, the older
    events re-verified (``recheck``, inclusive, or None) and how many events that is (``total``)."""

    scope: str
    segments: tuple[Segment, ...]
    from_seq: int
    recheck: tuple[int, int] | None
    total: int


def recheck_rounds() -> int:
    """How many scheduled checks share the older events between them: every older event is
    re-verified once per ``CHAIN_RECHECK_SECONDS`` when a check runs every ``CHAIN_CHECK_SECONDS``."""
    every, within = settings.ENGRAM["CHAIN_CHECK_SECONDS"], settings.ENGRAM["CHAIN_RECHECK_SECONDS"]
    return max(1, int(within // every))


def _check_plan(check: ChainCheck, last_seq: int) -> _Plan:
    """The plan of ``check`` over a log that ends at ``last_seq``. An incremental check builds on the
    last finished check: when that one is intact, it verifies the events after it, linked to the
    hash it ended on, and re-verifies the next window of older events (rotating from where the last
    window ended, back to #1 past the end): ``ceil(last_seq / recheck_rounds())`` of them, at least
    ``CHAIN_RECHECK_MIN_ROWS``. Otherwise (none yet, or broken or failed) it runs in full, so a
    finding stays named until a full check no longer finds it."""
    full = _Plan(CheckScope.FULL, (Segment(),), 1, None, last_seq)
    if check.scope != CheckScope.INCREMENTAL:
        return full
    finished = ChainCheck.objects.filter(finished_at__isnull=False).exclude(pk=check.pk)
    base = finished.order_by("-finished_at", "-id").first()
    if base is None or base.status != CheckStatus.INTACT or not base.head_seq:
        return full
    base_seq, base_hash = base.head_seq, base.head_hash
    rotated = (
        finished.filter(recheck_to__isnull=False)
        .order_by("-finished_at", "-id")
        .values_list("recheck_to", flat=True)
        .first()
    )
    start = (rotated or 0) + 1
    if start > base_seq:
        start = 1
    size = max(settings.ENGRAM["CHAIN_RECHECK_MIN_ROWS"], math.ceil(last_seq / recheck_rounds()))
    end = start + size - 1
    new = max(0, last_seq - base_seq)
    if end >= base_seq:  # the window reaches the new events: one segment to the end
        return _Plan(
            CheckScope.INCREMENTAL,
            (Segment(start, None, None),),
            base_seq + 1,
            (start, base_seq),
            base_seq - start + 1 + new,
        )
    return _Plan(
        CheckScope.INCREMENTAL,
        (Segment(start, end, None), Segment(base_seq + 1, None, base_hash)),
        base_seq + 1,
        (start, end),
        size + 1 + new,
    )


def chain_check_run(*, check_id: int, chunk_size: int = 10_000, sink_file: str | None = None) -> ChainCheck:
    """Run the check ``check_id``: every signed anchor (and those of ``sink_file``), then the links
    of the chain its plan covers (``_check_plan``: every event, or the new ones and a window of the
    older ones), the decisions behind redactions included, saving progress after each chunk so the
    admin's progress bar moves. Ends ``intact`` or ``broken`` with the findings, or ``failed`` with
    the error when it could not run (no public key, say). Running a check that already finished
    does nothing (tasks may repeat)."""
    check = ChainCheck.objects.filter(pk=check_id).first()
    if check is None:
        raise NotFound(f"No chain check {check_id}.", field="check_id")
    if check.is_done:
        return check
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT coalesce(max(seq), 0) FROM {Event._meta.db_table}")
        last_seq = int(cursor.fetchone()[0])
    plan = _check_plan(check, last_seq)
    ChainCheck.objects.filter(pk=check.pk).update(
        status=CheckStatus.RUNNING,
        started_at=timezone.now(),
        total=plan.total,
        scope=plan.scope,
        from_seq=plan.from_seq,
        recheck_from=plan.recheck[0] if plan.recheck else None,
        recheck_to=plan.recheck[1] if plan.recheck else None,
    )

    def progress(checked: int) -> None:
        ChainCheck.objects.filter(pk=check.pk).update(checked=checked)

    try:
        extra = []
        sink = sink_file or anchor_sink_file()
        if sink and os.path.exists(sink):
            extra = sink_records(sink)
        report = trail_verify(
            extra_anchors=extra, progress=progress, chunk_size=chunk_size, segments=plan.segments
        )
    except ServiceUnavailable as exc:
        ChainCheck.objects.filter(pk=check.pk).update(
            status=CheckStatus.FAILED, finished_at=timezone.now(), error=exc.message
        )
    else:
        ChainCheck.objects.filter(pk=check.pk).update(
            status=CheckStatus.INTACT if report.ok else CheckStatus.BROKEN,
            finished_at=timezone.now(),
            checked=report.chain.checked,
            head_seq=report.chain.last_seq,
            head_hash=report.chain.last_hash,
            anchors_checked=report.anchors_trusted,
            redacted=report.chain.redacted,
            findings=[f.as_dict() for f in report.findings],
        )
        if not report.ok:
            logger.error(
                "trail of tenant %s broken: %s",
                current_schema(),
                "; ".join(f.message for f in report.findings[:5]),
            )
    check.refresh_from_db()
    return check


def chain_check_scheduled() -> ChainCheck | None:
    """The scheduled check of the tenant's trail (Celery beat, every ``CHAIN_CHECK_SECONDS``): an
    incremental check, run now (a full one when the last check was not intact). So a change to
    a new event is named by the next check, and a change to an older one within
    ``CHAIN_RECHECK_SECONDS`` (+ one interval). Nothing (None) while another check of the tenant,
    queued or running, was started within the last hour or ten intervals (one left by a killed
    worker stops blocking after that). Intact incremental checks older than
    ``SCHEDULED_CHECKS_KEPT_DAYS`` are deleted from the history."""
    interval = float(settings.ENGRAM["CHAIN_CHECK_SECONDS"])
    recent = timezone.now() - timedelta(seconds=max(3600.0, 10 * interval))
    with transaction.atomic():
        advisory_xact_lock("chain-check-scheduled")
        if ChainCheck.objects.filter(
            status__in=[CheckStatus.QUEUED, CheckStatus.RUNNING], created_at__gte=recent
        ).exists():
            return None
        check = ChainCheck.objects.create(
            requested_by=SCHEDULED_CHECK_JOB, scope=CheckScope.INCREMENTAL, status=CheckStatus.RUNNING
        )
    done = chain_check_run(check_id=check.pk)
    # one a minute would bury the history: routine intact ones go after a week (broken, failed and
    # full checks stay)
    ChainCheck.objects.filter(
        scope=CheckScope.INCREMENTAL,
        status=CheckStatus.INTACT,
        finished_at__lt=timezone.now() - timedelta(days=SCHEDULED_CHECKS_KEPT_DAYS),
    ).delete()
    return done
