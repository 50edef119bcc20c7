"""Agents' reports of skill runs (counted per version) and their erasure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agents.models import Agent
from core.errors import InvalidInput

from .. import selectors
from ..models import SkillRun, SkillRunStats


@dataclass(frozen=True)
class RunData:
    """An agent's report of one run: which version, the outcome, the failing step, how long (ms)."""

    version: int
    success: bool
    failed_step: str = ""
    duration_ms: int | None = None
    session_id: str = ""
    error: str = ""


def skill_run_report(*, agent: Agent, name: str, data: RunData) -> SkillRun:
    """Record a run of skill ``name`` by ``agent`` and count it in its version's statistics.

    Raises ``NotFound`` (no such skill or version), ``InvalidInput``: a failure must name a step of
    that version (``failed_step``), a success must not, durations are non-negative.
    """
    version = selectors.skill_version_get(name, data.version)
    step_ids = [s.get("id") for s in version.steps if isinstance(s, dict)]
    if data.success and data.failed_step:
        raise InvalidInput("A successful run has no failed step.", field="failed_step")
    if data.failed_step and data.failed_step not in step_ids:
        raise InvalidInput(
            f"v{data.version} of {name} has no step {data.failed_step!r} (steps: {', '.join(map(str, step_ids))}).",
            field="failed_step",
        )
    if data.duration_ms is not None and (data.duration_ms < 0 or math.isnan(data.duration_ms)):
        raise InvalidInput("duration_ms is a non-negative number of milliseconds.", field="duration_ms")
    now = timezone.now()
    with transaction.atomic():
        run = SkillRun.objects.create(
            version=version,
            agent=agent,
            success=data.success,
            failed_step=data.failed_step,
            duration_ms=data.duration_ms,
            session_id=data.session_id,
            error=data.error,
            reported_at=now,
        )
        SkillRunStats.objects.get_or_create(version=version)
        SkillRunStats.objects.filter(pk=version.pk).update(
            runs=F("runs") + 1, successes=F("successes") + int(data.success), last_run_at=now
        )
    return run


def skill_runs_erase(*, run_ids: Sequence[int]) -> list[int]:
    """Delete for good the run reports ``run_ids`` of the current tenant (for an erasure or a
    retention pass: their session, agent and error text go). The versions' run counters
    (``SkillRunStats``) keep counting them: sums, which hold nothing of a run. Returns the ids
    deleted; ids already gone are skipped. The caller records why."""
    ids = list(run_ids)
    if not ids:
        return []
    with transaction.atomic():
        gone = sorted(SkillRun.objects.filter(pk__in=ids).values_list("pk", flat=True))
        SkillRun.objects.filter(pk__in=gone).delete()
    return gone
