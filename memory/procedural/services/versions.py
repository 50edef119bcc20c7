"""An operator's work on a skill's versions: drafts, publishing (or rolling back to a version
published before) and retiring (or rejecting a draft)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, InvalidInput, NotFound

from ..diff import version_diff
from ..models import SkillVersion, VersionStatus
from ..validation import Compiled
from .common import MAX_TEXT_CHARS, Actor, invalid, skill_session
from .skills import skill_locked, version_number_next
from .tools import version_compile


def draft_create(*, actor: Actor, name: str, from_number: int) -> SkillVersion:
    """A new draft of skill ``name`` copying version ``from_number`` (any status): where an operator
    starts a change. Raises ``NotFound``."""
    with transaction.atomic():
        skill = skill_locked(name)
        base = SkillVersion.objects.filter(skill=skill, number=from_number).first()
        if base is None:
            raise NotFound(f"Skill {name!r} has no version {from_number}.", field="number")
        number = version_number_next(skill)
        version = SkillVersion.objects.create(
            skill=skill,
            number=number,
            steps=base.steps,
            input_schema=base.input_schema,
            author=actor.label,
            based_on=base.number,
        )
        actor.record(
            session_id=skill_session(name),
            content=f"{actor.label} started draft v{number} of {name} from v{from_number}.",
            payload={
                "action": "skill_draft_create",
                "skill": name,
                "version": number,
                "from_version": from_number,
            },
        )
    return version


def draft_save(
    *,
    actor: Actor,
    name: str,
    number: int,
    revision: int,
    steps: Any,
    input_schema: Any,
    change_note: str,
) -> tuple[SkillVersion, Compiled]:
    """Save an edited draft (it may not compile yet: a draft is work in progress) and return it
    with the compiler's verdict.

    ``revision`` is the draft's revision the editor started from: if someone saved it since, the
    save is refused with ``Conflict`` (field ``revision``, ``current_revision`` in the body) and
    nothing is written. Only drafts can be edited (``Conflict`` otherwise). Logs the diff's size.
    """
    if not isinstance(change_note, str) or len(change_note) > MAX_TEXT_CHARS or "\x00" in change_note:
        raise InvalidInput(f"At most {MAX_TEXT_CHARS} characters.", field="change_note")
    if not isinstance(steps, list):
        raise InvalidInput("steps is a list.", field="steps")
    with transaction.atomic():
        version = (
            SkillVersion.objects.select_for_update(of=("self",))
            .select_related("skill")
            .filter(skill__name=name, number=number)
            .first()
        )
        if version is None:
            raise NotFound(f"Skill {name!r} has no version {number}.", field="number")
        if version.status != VersionStatus.DRAFT:
            raise Conflict(f"v{number} is {version.status}: only drafts can be edited.", field="status")
        if version.revision != revision:
            raise Conflict(
                f"Someone saved v{number} since you opened it (revision {version.revision}, yours "
                f"{revision}); reload it and apply your changes again.",
                field="revision",
                extra={"current_revision": version.revision},
            )
        diff = version_diff(
            old_steps=version.steps,
            new_steps=steps,
            old_input_schema=version.input_schema,
            new_input_schema=input_schema,
        )
        version.steps, version.input_schema, version.change_note = steps, input_schema, change_note
        version.revision += 1
        version.save(update_fields=["steps", "input_schema", "change_note", "revision"])
        actor.record(
            session_id=skill_session(name),
            content=f"{actor.label} saved draft v{number} of {name} (revision {version.revision}, "
            f"{diff.size} step change{'s' if diff.size != 1 else ''}).",
            payload={
                "action": "skill_draft_save",
                "skill": name,
                "version": number,
                "revision": version.revision,
                "diff_size": diff.size,
            },
        )
    return version, version_compile(steps=steps, input_schema=input_schema)


def version_publish(*, username: str, name: str, number: int, expected_published: int | None) -> SkillVersion:
    """Publish version ``number`` of skill ``name`` as the person ``username`` (operators only:
    agents propose, people publish). The published version before it is retired.

    - A draft must compile against the tools' newest versions, which are then pinned in it
      (``tool_versions``); a published version's content is immutable from then on.
    - A retired version that was published before is published again: a rollback, recorded as
      ``skill_rollback``; it keeps its pinned tool versions.
    - ``expected_published`` is the version the operator saw published (None: none): if another
      publish came first, ``Conflict`` (field ``expected_published``) and nothing changes, so of two
      concurrent publishes exactly one wins. The partial unique index stands behind it.

    Logs ``from_version``, ``to_version`` and the diff's size. Raises ``NotFound``, ``Conflict``,
    ``InvalidInput`` (the compile problems by JSON path).
    """
    actor = Actor(username=username)
    with transaction.atomic():
        target, current, rollback = _publish_target(name=name, number=number, expected=expected_published)
        compiled = version_compile(
            steps=target.steps,
            input_schema=target.input_schema,
            pins=target.tool_versions if rollback else None,
        )
        if not compiled.ok:
            raise invalid(f"v{number} does not compile; fix it before publishing.", compiled)
        now = timezone.now()
        if current is not None:
            current.status, current.retired_at, current.status_changed_at = VersionStatus.RETIRED, now, now
            current.save(update_fields=["status", "retired_at", "status_changed_at"])
        target.status, target.status_changed_at, target.retired_at = VersionStatus.PUBLISHED, now, None
        fields = ["status", "status_changed_at", "retired_at"]
        if not rollback:
            target.tool_versions, target.published_at, target.published_by = (
                compiled.tool_versions,
                now,
                username,
            )
            fields += ["tool_versions", "published_at", "published_by"]
        target.save(update_fields=fields)
        _publish_record(actor, name=name, target=target, current=current, rollback=rollback)
    return target


def _publish_target(
    *, name: str, number: int, expected: int | None
) -> tuple[SkillVersion, SkillVersion | None, bool]:
    """Version ``number`` of skill ``name``, locked with its skill, the version published now (None:
    none) and whether publishing the target is a rollback. Raises ``NotFound``, and ``Conflict`` when
    the published version is not ``expected``, the target is published already or was never
    published (a rejected draft)."""
    skill = skill_locked(name)
    target = SkillVersion.objects.select_for_update().filter(skill=skill, number=number).first()
    if target is None:
        raise NotFound(f"Skill {name!r} has no version {number}.", field="number")
    current = SkillVersion.objects.filter(skill=skill, status=VersionStatus.PUBLISHED).first()
    seen = current.number if current else None
    if seen != expected:
        raise Conflict(
            f"{name} has changed since you looked: v{seen} is published now"
            if seen
            else f"{name} has changed since you looked: nothing is published now",
            field="expected_published",
            extra={"current_published": seen},
        )
    if target.status == VersionStatus.PUBLISHED:
        raise Conflict(f"v{number} is already published.", field="number")
    rollback = target.status == VersionStatus.RETIRED
    if rollback and target.published_at is None:
        raise Conflict(
            f"v{number} was never published (a rejected draft); start a new draft from it instead.",
            field="number",
        )
    return target, current, rollback


def _publish_record(
    actor: Actor, *, name: str, target: SkillVersion, current: SkillVersion | None, rollback: bool
) -> None:
    """The ``skill_publish`` (or ``skill_rollback``) decision of ``target`` replacing ``current``."""
    username, number = actor.username, target.number
    diff = version_diff(
        old_steps=current.steps if current else [],
        new_steps=target.steps,
        old_input_schema=current.input_schema if current else None,
        new_input_schema=target.input_schema,
    )
    action = "skill_rollback" if rollback else "skill_publish"
    verb = "rolled back" if rollback else "published"
    actor.record(
        session_id=skill_session(name),
        content=f"{username} {verb} {name} to v{number}"
        + (f" (was v{current.number})" if current else "")
        + f": {diff.size} change{'s' if diff.size != 1 else ''}."
        + (
            f" Proposed by {target.proposed_by.name}." if target.proposed_by_id and target.proposed_by else ""
        ),
        payload={
            "action": action,
            "skill": name,
            "from_version": current.number if current else None,
            "to_version": number,
            "diff_size": diff.size,
            "tool_versions": target.tool_versions,
            "proposed_by": target.proposed_by.name if target.proposed_by else None,
        },
    )


def version_retire(*, username: str, name: str, number: int, reason: str = "") -> SkillVersion:
    """Retire version ``number`` as the person ``username``: the published version (the skill then
    has none, and is no longer matched), or a draft nobody will publish (a rejected proposal).
    Raises ``NotFound``, ``Conflict`` (already retired)."""
    if not isinstance(reason, str) or len(reason) > MAX_TEXT_CHARS:
        raise InvalidInput(f"At most {MAX_TEXT_CHARS} characters.", field="reason")
    with transaction.atomic():
        skill = skill_locked(name)
        version = SkillVersion.objects.select_for_update().filter(skill=skill, number=number).first()
        if version is None:
            raise NotFound(f"Skill {name!r} has no version {number}.", field="number")
        if version.status == VersionStatus.RETIRED:
            raise Conflict(f"v{number} is already retired.", field="number")
        was = version.status
        now = timezone.now()
        version.status, version.retired_at, version.status_changed_at = VersionStatus.RETIRED, now, now
        version.save(update_fields=["status", "retired_at", "status_changed_at"])
        action = "skill_retire" if was == VersionStatus.PUBLISHED else "skill_reject"
        Actor(username=username).record(
            session_id=skill_session(name),
            content=f"{username} {'retired' if was == VersionStatus.PUBLISHED else 'rejected'} {name} v{number}"
            + (f": {reason}" if reason else "."),
            payload={
                "action": action,
                "skill": name,
                "from_version": number,
                "to_version": None,
                "diff_size": 0,
                "was": was,
                "reason": reason,
                "proposed_by": version.proposed_by.name if version.proposed_by else None,
            },
        )
    return version
