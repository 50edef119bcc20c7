"""One consolidation pass when the tenant's policy says it is due."""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.utils import timezone

from core.tenancy import current_schema
from memory.semantic.selectors import consolidation_policy

from ..models import ConsolidationRun
from ..selectors import consolidation_due
from .forgetting import forgetting_pass
from .promotion import promotion_pass
from .summaries import summaries_pass

logger = logging.getLogger(__name__)


def consolidate(*, now: datetime | None = None, force: bool = False) -> list[ConsolidationRun]:
    """One consolidation pass in the current tenant, when due by its policy's ``interval_hours`` (or
    ``force``), or when a run was left unfinished: promotion, then forgetting, then summaries.
    Returns the runs made (none when not due; a job already running elsewhere is left to it)."""
    moment = now or timezone.now()
    if not force and not consolidation_due(interval_hours=consolidation_policy().interval_hours, now=moment):
        return []
    runs = []
    started = time.monotonic()
    for job in (promotion_pass, forgetting_pass, summaries_pass):
        run = job(now=now)
        if run is not None:
            runs.append(run)
    logger.info("consolidation of %s took %.1f s", current_schema(), time.monotonic() - started)
    return runs
