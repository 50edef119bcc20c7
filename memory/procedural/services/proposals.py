"""Agents' proposals: a new skill, or a new version of one, as a draft that only an operator can
publish (``versions.version_publish``); the steps must compile to be proposed."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.models import Agent
from core.errors import NotFound

from ..diff import version_diff
from ..models import SkillVersion, VersionStatus
from ..validation import Compiled
from .common import Actor, invalid, skill_session
from .skills import SkillData, skill_insert, skill_locked, skill_new, version_number_next
from .tools import version_compile


def _proposal_compiled(steps: Any, input_schema: Any) -> Compiled:
    compiled = version_compile(steps=steps, input_schema=input_schema)
    if not compiled.ok:
        raise invalid(
            f"The proposed steps do not compile ({len(compiled.problems)} problem"
            f"{'s' if len(compiled.problems) != 1 else ''}); see errors.",
            compiled,
        )
    return compiled


def skill_propose(
    *,
    agent: Agent,
    name: str,
    data: SkillData,
    input_schema: Any,
    steps: Any,
    change_note: str = "",
    session_id: str = "",
) -> SkillVersion:
    """An agent proposes a new skill: the skill and its version 1 as a draft that only an operator
    can publish. The steps must compile (else ``InvalidInput`` with every problem by JSON path);
    ``Conflict`` when the name is taken (propose a version of it instead)."""
    _proposal_compiled(steps, input_schema)
    actor = Actor(agent=agent)
    skill = skill_new(actor=actor, name=name, data=data)
    with transaction.atomic():
        skill_insert(skill)
        version = SkillVersion.objects.create(
            skill=skill,
            number=1,
            steps=steps,
            input_schema=input_schema,
            change_note=change_note,
            author=actor.label,
            proposed_by=agent,
            source_session_id=session_id,
        )
        diff = version_diff(old_steps=[], new_steps=steps, new_input_schema=input_schema)
        actor.record(
            session_id=skill_session(name),
            content=f"{agent.name} proposed the new skill {name} (draft v1, {len(steps)} steps).",
            payload={
                "action": "skill_propose",
                "skill": name,
                "version": 1,
                "from_version": None,
                "to_version": 1,
                "diff_size": diff.size,
                "source_session_id": session_id,
            },
        )
    return version


def skill_version_propose(
    *,
    agent: Agent,
    name: str,
    steps: Any,
    input_schema: Any = None,
    change_note: str = "",
    based_on: int | None = None,
    session_id: str = "",
) -> SkillVersion:
    """An agent proposes a new version of skill ``name`` (a draft only an operator can publish),
    learned from a run. ``based_on`` (default: the published version, else the newest) gives the
    input schema when none is sent and the base of the recorded diff. Raises ``NotFound``,
    ``InvalidInput`` (with every compile problem)."""
    with transaction.atomic():
        skill = skill_locked(name)
        versions = SkillVersion.objects.filter(skill=skill)
        if based_on is not None:
            base = versions.filter(number=based_on).first()
            if base is None:
                raise NotFound(f"Skill {name!r} has no version {based_on}.", field="based_on")
        else:
            base = (
                versions.filter(status=VersionStatus.PUBLISHED).first()
                or versions.order_by("-number").first()
            )
        schema = input_schema if input_schema is not None else (base.input_schema if base else None)
        _proposal_compiled(steps, schema)
        number = version_number_next(skill)
        version = SkillVersion.objects.create(
            skill=skill,
            number=number,
            steps=steps,
            input_schema=schema,
            change_note=change_note,
            author=f"agent:{agent.name}",
            proposed_by=agent,
            source_session_id=session_id,
            based_on=base.number if base else None,
        )
        diff = version_diff(
            old_steps=base.steps if base else [],
            new_steps=steps,
            old_input_schema=base.input_schema if base else None,
            new_input_schema=schema,
        )
        Actor(agent=agent).record(
            session_id=skill_session(name),
            content=f"{agent.name} proposed {name} v{number}"
            + (f" (from v{base.number}, {diff.size} change{'s' if diff.size != 1 else ''})" if base else ""),
            payload={
                "action": "skill_propose",
                "skill": name,
                "version": number,
                "from_version": base.number if base else None,
                "to_version": number,
                "diff_size": diff.size,
                "source_session_id": session_id,
            },
        )
    return version
