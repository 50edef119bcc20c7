"""Retention: the rules per layer, changed in the admin and recorded, and the runs that apply them
in bounded batches (``compliance.lifecycle``)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.errors import InvalidInput, NotFound
from core.locks import advisory_xact_lock
from memory.consolidation.services.lifecycle import summaries_paused

from .. import lifecycle, redaction
from ..models import RetentionRule, RetentionRun, RunStatus
from .records import LIFECYCLE_SESSION, job_record, person_record

logger = logging.getLogger(__name__)


RETENTION_JOB = "retention"


def _layer_or_error(name: str) -> lifecycle.Layer:
    try:
        return lifecycle.layer_get(name)
    except KeyError:
        raise InvalidInput(
            f"Unknown layer {name!r}; use one of {', '.join(lifecycle.LAYER_NAMES)}.", field="layer"
        ) from None


def retention_rule_save(*, rule: RetentionRule, username: str) -> RetentionRule:
    """Save a retention rule as changed in the admin by ``username`` and record it (old and new
    days). Raises ``InvalidInput`` for an unknown layer or memory type, or a layer kept by its
    TTLs rather than by age."""
    layer = _layer_or_error(rule.layer)
    if rule.memory_type and rule.memory_type not in layer.kinds:
        raise InvalidInput(f"The {layer.name} layer has no type {rule.memory_type!r}.", field="memory_type")
    if layer.aged is None or layer.like_sources:
        raise InvalidInput(f"The {layer.label} are kept by {layer.counts_from}.", field="layer")
    with transaction.atomic():
        old = RetentionRule.objects.filter(pk=rule.pk).values_list("keep_days", flat=True).first()
        rule.updated_by, rule.updated_at = f"user:{username}", timezone.now()
        rule.full_clean()
        rule.save()
        kind = f" ({rule.memory_type})" if rule.memory_type else ""
        person_record(
            username=username,
            action="retention_rule_update" if old is not None else "retention_rule_create",
            content=f"{username} set the retention of {layer.label}{kind} to {rule.keep_days} days"
            + (f" (was {old})." if old is not None else "."),
            payload={
                "layer": rule.layer,
                "memory_type": rule.memory_type,
                "keep_days": rule.keep_days,
                "previous": old,
            },
            session_id=LIFECYCLE_SESSION,
        )
    return rule


def retention_rule_delete(*, rule: RetentionRule, username: str) -> None:
    """Delete a stored rule (the layer's default applies again) and record it."""
    with transaction.atomic():
        layer, kind, days = rule.layer, rule.memory_type, rule.keep_days
        rule.delete()
        person_record(
            username=username,
            action="retention_rule_delete",
            content=f"{username} removed the retention rule of {layer}"
            + (f" ({kind})" if kind else "")
            + f" ({days} days): the default applies.",
            payload={"layer": layer, "memory_type": kind, "previous": days},
            session_id=LIFECYCLE_SESSION,
        )


def retention_run_start(*, requested_by: str) -> RetentionRun:
    """The unfinished retention run of the tenant (one interrupted), else a new one."""
    with transaction.atomic():
        advisory_xact_lock("retention-run")
        run = RetentionRun.objects.filter(status=RunStatus.RUNNING).order_by("pk").first()
        return run or RetentionRun.objects.create(requested_by=requested_by)


def retention_run(*, run_id: int, now: datetime | None = None, batch: int | None = None) -> RetentionRun:
    """Apply the retention rules (``compliance.lifecycle``) for run ``run_id``: per layer, rows past
    their rule and under no legal hold, ``batch`` at a time (``ENGRAM_LIFECYCLE_BATCH``), each batch
    one transaction that locks only its rows (``SKIP LOCKED``: rows another transaction holds wait
    for the next run; batches follow the primary key) and adds its count to the run, so
    no lock is held long and a run that was interrupted resumes where it stopped. Each batch of
    events redacted is named by a signed decision of ``job:retention`` (``compliance.redaction``;
    the run fails at once without a signing key). When every layer is done, logs one system
    decision (``job:retention``) with what was removed per layer.
    A run already finished is returned as it is. On an error the run is ``failed`` (logged) and
    the next run takes over."""
    run = RetentionRun.objects.filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"No retention run {run_id}.", field="run_id")
    if run.status != RunStatus.RUNNING:
        return run
    now = now or timezone.now()
    size = batch or settings.ENGRAM["LIFECYCLE_BATCH"]
    try:
        decided = redaction.redactions_decided(
            job=RETENTION_JOB, label=f"Retention run #{run.pk}", basis={"retention_run": run.pk}
        )
        with summaries_paused(), decided:  # see erasure_run: redactions and the summaries covering them
            _retention_layers(run, now=now, size=size)
    except Exception as exc:  # recorded on the run; the next daily run starts afresh
        logger.exception("retention run %s failed", run.pk)
        RetentionRun.objects.filter(pk=run.pk).update(
            status=RunStatus.FAILED, finished_at=timezone.now(), error=f"{type(exc).__name__}: {exc}"
        )
        run.refresh_from_db()
        return run
    lifecycle.vacuum([layer.model._meta.db_table for layer in lifecycle.stored_layers() if layer.model])
    with transaction.atomic():
        run = RetentionRun.objects.select_for_update().get(pk=run.pk)
        run.status, run.finished_at = RunStatus.DONE, timezone.now()
        run.save(update_fields=["status", "finished_at"])
        totals: dict[str, int] = {name: run.removed.get(name, 0) for name in lifecycle.LAYER_NAMES}
        job_record(
            job=RETENTION_JOB,
            action="retention_purge",
            content="Retention removed "
            + ", ".join(f"{n} {lifecycle.layer_get(name).label}" for name, n in totals.items() if n)
            + "."
            if any(totals.values())
            else "Retention removed nothing.",
            payload={"run_id": run.pk, "removed": totals, "as_of": now.isoformat()},
            session_id=LIFECYCLE_SESSION,
        )
    return run


def _retention_layers(run: RetentionRun, *, now: datetime, size: int) -> None:
    """Every stored layer's retention for ``run``, in committed batches (see ``retention_run``)."""
    for layer in lifecycle.stored_layers():
        after: Any = None  # keyset: the batches behind stay dead tuples until the vacuum
        while True:
            with transaction.atomic():
                rows = lifecycle.retention_candidates(layer, now=now)
                if rows is None:
                    break
                if after is not None:
                    rows = rows.filter(pk__gt=after)
                chosen = list(
                    rows.order_by("pk")
                    .select_for_update(skip_locked=True, of=("self",))
                    .values(*layer.load)[:size]
                )
                if not chosen:
                    break
                after = chosen[-1]["pk"]
                assert layer.remove is not None
                removed = layer.remove(chosen)
                counts = RetentionRun.objects.select_for_update().get(pk=run.pk).removed
                counts[layer.name] = counts.get(layer.name, 0) + len(removed.ids)
                RetentionRun.objects.filter(pk=run.pk).update(removed=counts)
