"""Writes to procedural memory: tool contracts, skills, drafts, publishing, retiring, rolling back,
agents' proposals and run reports. Each change a person or an agent makes is recorded here as a
``decision`` event in the skill's (or tool's) trail session: ``skill:<name>`` / ``tool:<name>``.

Who acted: an agent (``agent=``; the event is the agent's) or a person in the admin
(``username=``; the event is the tenant's system agent's, with ``actor`` ``user:<username>``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from agents.models import Agent
from agents.services import system_agent_get
from core.errors import Conflict, InvalidInput, NotFound
from memory.embeddings import check_vector, get_embedder
from memory.episodic.services import decision_record

from . import selectors
from .diff import version_diff
from .models import (
    NAME_PATTERN,
    Skill,
    SkillRun,
    SkillRunStats,
    SkillVersion,
    Tool,
    ToolVersion,
    VersionStatus,
)
from .validation import Compiled, ToolContract, compile_skill, schema_problems

MAX_INTENTS = 50
MAX_TAGS = 50
MAX_TEXT_CHARS = 4000


@dataclass(frozen=True)
class Actor:
    """Who makes a change: an ``agent`` (through the API) or the person ``username`` (the admin)."""

    agent: Agent | None = None
    username: str | None = None

    def __post_init__(self) -> None:
        if (self.agent is None) == (self.username is None):
            raise ValueError("an Actor is an agent or a person, not both or neither")

    @property
    def label(self) -> str:
        """``agent:<name>`` or ``user:<name>``: how versions and tools record their author."""
        return f"agent:{self.agent.name}" if self.agent is not None else f"user:{self.username}"

    def record(self, *, session_id: str, content: str, payload: dict[str, Any]) -> None:
        """Append the ``decision`` event of this change to the trail."""
        if self.agent is not None:
            decision_record(agent=self.agent, session_id=session_id, content=content, payload=payload)
        else:
            decision_record(
                agent=system_agent_get(),
                session_id=session_id,
                content=content,
                payload=payload,
                actor=f"user:{self.username}",
            )


def skill_session(name: str) -> str:
    """The trail session of a skill's decisions."""
    return f"skill:{name}"


def _invalid(message: str, compiled: Compiled | None = None, *, field: str | None = None) -> InvalidInput:
    """A 400 whose ``errors`` are the compiler's ``{path: [messages]}`` and ``problems`` the list."""
    if compiled is None:
        return InvalidInput(message, field=field)
    return InvalidInput(
        message,
        errors=compiled.errors(),
        extra={"problems": [p.as_dict() for p in compiled.problems]},
    )


def _check_name(name: Any, *, field: str = "name") -> str:
    import re

    if not isinstance(name, str) or not re.match(NAME_PATTERN, name):
        raise InvalidInput(
            "A name is a lowercase letter, then lowercase letters, digits, '-' or '_' (at most 64).",
            field=field,
        )
    return name


def _check_texts(values: Any, *, field: str, limit: int, max_chars: int) -> list[str]:
    if not isinstance(values, list | tuple) or len(values) > limit:
        raise InvalidInput(f"A list of at most {limit} strings.", field=field)
    cleaned = []
    for value in values:
        if not isinstance(value, str) or not value.strip() or len(value) > max_chars or "\x00" in value:
            raise InvalidInput(f"Each is a non-blank string of at most {max_chars} characters.", field=field)
        cleaned.append(value.strip())
    return list(dict.fromkeys(cleaned))


# --- tools --------------------------------------------------------------------------------------------


def tool_save(
    *, actor: Actor, name: str, description: str, input_schema: Any, output_schema: Any
) -> tuple[ToolVersion, bool]:
    """Create tool ``name`` (version 1) or give it a new version with these contracts.

    Versions are immutable, so a skill version pinned to one keeps what it was validated against;
    the same contracts and description as the newest version change nothing. Returns
    ``(version, created)``. Raises ``InvalidInput`` naming the JSON path of a schema that is not a
    2020-12 object schema.
    """
    _check_name(name)
    if not isinstance(description, str) or len(description) > MAX_TEXT_CHARS or "\x00" in description:
        raise InvalidInput(f"At most {MAX_TEXT_CHARS} characters.", field="description")
    problems = schema_problems(input_schema, path="input_schema") + schema_problems(
        output_schema, path="output_schema"
    )
    if problems:
        raise _invalid("The tool's schemas are not valid.", Compiled(problems))
    with transaction.atomic():
        tool, _ = Tool.objects.get_or_create(name=name)
        tool = Tool.objects.select_for_update().get(pk=tool.pk)
        latest = ToolVersion.objects.filter(tool=tool).order_by("-version").first()
        if latest is not None and (latest.description, latest.input_schema, latest.output_schema) == (
            description,
            input_schema,
            output_schema,
        ):
            return latest, False
        version = ToolVersion(
            tool=tool,
            version=(latest.version + 1) if latest else 1,
            description=description,
            input_schema=input_schema,
            output_schema=output_schema,
            author=actor.label,
        )
        version.full_clean()
        version.save()
        actor.record(
            session_id=f"tool:{name}",
            content=f"{actor.label} saved tool {name} v{version.version}.",
            payload={
                "action": "tool_version_create",
                "tool": name,
                "version": version.version,
                "previous_version": latest.version if latest else None,
            },
        )
    return version, True


# --- compile ------------------------------------------------------------------------------------------


def version_compile(*, steps: Any, input_schema: Any, pins: dict[str, int] | None = None) -> Compiled:
    """Compile steps against the tools: their newest versions (a draft) or the ``pins`` (a version
    published before). See ``validation.compile_skill``."""
    if pins:
        versions = selectors.tool_versions_pinned(pins)
        missing = {n for n in selectors.step_tool_names(steps) if n not in versions}
        versions.update(selectors.tool_versions_latest(missing))
    else:
        versions = selectors.tool_versions_latest(selectors.step_tool_names(steps))
    tools = {
        name: ToolContract(name, v.version, v.input_schema, v.output_schema) for name, v in versions.items()
    }
    return compile_skill(steps=steps, input_schema=input_schema, tools=tools)


# --- skills -------------------------------------------------------------------------------------------


def skill_embedding(skill: Skill) -> np.ndarray:
    """The embedding of the skill's title, intents and description (the tenant's embedder). Raises
    ``EmbedderUnavailable`` (503) when the embedder cannot answer."""
    embedder = get_embedder()
    return check_vector(embedder.embed([skill.match_text()])[0], model=embedder.name, embedder=embedder)


def _embed(skill: Skill) -> None:
    embedder = get_embedder()
    skill.embedding = skill_embedding(skill)
    skill.embedding_model, skill.embedding_dimensions = embedder.name, embedder.dimensions


@dataclass(frozen=True)
class SkillData:
    """What describes a skill: what requests match (title, description, intents) and its labels."""

    title: str
    description: str = ""
    intents: Sequence[str] = ()
    tags: Sequence[str] = ()
    owner: str = ""


def _clean(data: SkillData) -> SkillData:
    if not isinstance(data.title, str) or not data.title.strip() or len(data.title) > 200:
        raise InvalidInput("A title of 1 to 200 characters is required.", field="title")
    if not isinstance(data.description, str) or len(data.description) > MAX_TEXT_CHARS:
        raise InvalidInput(f"At most {MAX_TEXT_CHARS} characters.", field="description")
    if not isinstance(data.owner, str) or len(data.owner) > 200:
        raise InvalidInput("At most 200 characters.", field="owner")
    for name in ("title", "description", "owner"):
        if "\x00" in getattr(data, name):
            raise InvalidInput("NUL characters are not allowed.", field=name)
    return SkillData(
        title=data.title.strip(),
        description=data.description.strip(),
        intents=_check_texts(list(data.intents), field="intents", limit=MAX_INTENTS, max_chars=300),
        tags=_check_texts(list(data.tags), field="tags", limit=MAX_TAGS, max_chars=64),
        owner=data.owner.strip(),
    )


def _skill_new(*, actor: Actor, name: str, data: SkillData) -> Skill:
    _check_name(name)
    data = _clean(data)
    skill = Skill(
        name=name,
        title=data.title,
        description=data.description,
        intents=list(data.intents),
        intents_text="\n".join(data.intents),
        tags=list(data.tags),
        owner=data.owner,
        created_by=actor.label,
    )
    _embed(skill)  # before the transaction: a slow embedder holds no lock
    return skill


def _insert_skill(skill: Skill) -> Skill:
    if Skill.objects.filter(name=skill.name).exists():
        raise Conflict(f"There is already a skill {skill.name!r}.", field="name")
    try:
        with transaction.atomic():
            skill.save(force_insert=True)
    except IntegrityError:
        raise Conflict(f"There is already a skill {skill.name!r}.", field="name") from None
    return skill


def skill_create(*, actor: Actor, name: str, data: SkillData, input_schema: Any = None) -> SkillVersion:
    """Create skill ``name`` with an empty draft (version 1), as an operator does in the admin.

    Raises ``InvalidInput`` for a bad name or description, ``Conflict`` for a name in use.
    """
    skill = _skill_new(actor=actor, name=name, data=data)
    schema = input_schema or {"type": "object", "properties": {}, "required": []}
    with transaction.atomic():
        _insert_skill(skill)
        version = SkillVersion.objects.create(
            skill=skill, number=1, steps=[], input_schema=schema, author=actor.label
        )
        actor.record(
            session_id=skill_session(name),
            content=f"{actor.label} created skill {name} with an empty draft v1.",
            payload={"action": "skill_create", "skill": name, "version": 1},
        )
    return version


def skill_update(*, actor: Actor, skill_id: int, data: SkillData) -> tuple[Skill, list[str]]:
    """Change a skill's title, description, intents, tags or owner (its name is fixed: versions
    and runs refer to it). What requests match is embedded again when it changed. Logs the changed
    fields with their old and new values. Returns ``(skill, changed field names)``."""
    data = _clean(data)
    skill = Skill.objects.filter(pk=skill_id).first()
    if skill is None:
        raise NotFound(f"No skill #{skill_id}.", field="id")
    wanted = {
        "title": data.title,
        "description": data.description,
        "intents": list(data.intents),
        "tags": list(data.tags),
        "owner": data.owner,
    }
    changes = {f: [getattr(skill, f), v] for f, v in wanted.items() if getattr(skill, f) != v}
    if not changes:
        return skill, []
    for f, (_, v) in changes.items():
        setattr(skill, f, v)
    skill.intents_text = "\n".join(skill.intents)
    fields = [*changes, "intents_text", "updated_at"]
    if {"title", "description", "intents"} & set(changes):
        _embed(skill)
        fields += ["embedding", "embedding_model", "embedding_dimensions"]
    skill.updated_at = timezone.now()
    with transaction.atomic():
        skill.save(update_fields=fields)
        actor.record(
            session_id=skill_session(skill.name),
            content=f"{actor.label} changed skill {skill.name}: " + ", ".join(changes),
            payload={"action": "skill_update", "skill": skill.name, "changes": changes},
        )
    return skill, list(changes)


def _locked_skill(name: str) -> Skill:
    skill = Skill.objects.select_for_update().defer("embedding", "search").filter(name=name).first()
    if skill is None:
        raise NotFound(f"No skill {name!r}.", field="name")
    return skill


def _next_number(skill: Skill) -> int:
    last = (
        SkillVersion.objects.filter(skill=skill).order_by("-number").values_list("number", flat=True).first()
    )
    return (last or 0) + 1


def _proposal_compiled(steps: Any, input_schema: Any) -> Compiled:
    compiled = version_compile(steps=steps, input_schema=input_schema)
    if not compiled.ok:
        raise _invalid(
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
    skill = _skill_new(actor=actor, name=name, data=data)
    with transaction.atomic():
        _insert_skill(skill)
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
        skill = _locked_skill(name)
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
        number = _next_number(skill)
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


def draft_create(*, actor: Actor, name: str, from_number: int) -> SkillVersion:
    """A new draft of skill ``name`` copying version ``from_number`` (any status): where an operator
    starts a change. Raises ``NotFound``."""
    with transaction.atomic():
        skill = _locked_skill(name)
        base = SkillVersion.objects.filter(skill=skill, number=from_number).first()
        if base is None:
            raise NotFound(f"Skill {name!r} has no version {from_number}.", field="number")
        number = _next_number(skill)
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
        skill = _locked_skill(name)
        target = SkillVersion.objects.select_for_update().filter(skill=skill, number=number).first()
        if target is None:
            raise NotFound(f"Skill {name!r} has no version {number}.", field="number")
        current = SkillVersion.objects.filter(skill=skill, status=VersionStatus.PUBLISHED).first()
        seen = current.number if current else None
        if seen != expected_published:
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
        compiled = version_compile(
            steps=target.steps,
            input_schema=target.input_schema,
            pins=target.tool_versions if rollback else None,
        )
        if not compiled.ok:
            raise _invalid(f"v{number} does not compile; fix it before publishing.", compiled)
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
                f" Proposed by {target.proposed_by.name}."
                if target.proposed_by_id and target.proposed_by
                else ""
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
    return target


def version_retire(*, username: str, name: str, number: int, reason: str = "") -> SkillVersion:
    """Retire version ``number`` as the person ``username``: the published version (the skill then
    has none, and is no longer matched), or a draft nobody will publish (a rejected proposal).
    Raises ``NotFound``, ``Conflict`` (already retired)."""
    if not isinstance(reason, str) or len(reason) > MAX_TEXT_CHARS:
        raise InvalidInput(f"At most {MAX_TEXT_CHARS} characters.", field="reason")
    with transaction.atomic():
        skill = _locked_skill(name)
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


# --- runs ---------------------------------------------------------------------------------------------


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
