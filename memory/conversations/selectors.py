"""Reads of conversations: an agent's extraction job."""

from __future__ import annotations

import uuid
from typing import Any

from agents.models import Agent
from agents.subjects import subject_visible_q

from .models import ExtractionJob


def job_get(*, agent: Agent, job_id: Any) -> ExtractionJob | None:
    """The extraction job ``job_id`` of ``agent`` (another agent's, another end user's than the one
    ``agent`` acts for (``agents.subjects``), or an id that is no UUID: None)."""
    try:
        key = uuid.UUID(str(job_id))
    except ValueError:
        return None
    return ExtractionJob.objects.filter(subject_visible_q(agent), agent=agent, pk=key).first()
