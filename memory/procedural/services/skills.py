"""Skills: what describes them (title, description, intents, tags, owner) and its embedding, and the
helpers the proposals and versions share (a skill locked by name, the next version number)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import Conflict, InvalidInput, NotFound
from memory.embeddings import check_vector, get_embedder

from ..models import Skill, SkillVersion
from .common import MAX_INTENTS, MAX_TAGS, MAX_TEXT_CHARS, Actor, check_name, check_texts, skill_session


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
        intents=check_texts(list(data.intents), field="intents", limit=MAX_INTENTS, max_chars=300),
        tags=check_texts(list(data.tags), field="tags", limit=MAX_TAGS, max_chars=64),
        owner=data.owner.strip(),
    )


def skill_new(*, actor: Actor, name: str, data: SkillData) -> Skill:
    """An unsaved skill ``name`` described by ``data`` (checked) and embedded. Raises ``InvalidInput``,
    ``EmbedderUnavailable``."""
    check_name(name)
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


def skill_insert(skill: Skill) -> Skill:
    """Insert the new ``skill``. Raises ``Conflict`` (field ``name``) when the name is in use."""
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
    skill = skill_new(actor=actor, name=name, data=data)
    schema = input_schema or {"type": "object", "properties": {}, "required": []}
    with transaction.atomic():
        skill_insert(skill)
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


def skill_locked(name: str) -> Skill:
    """Skill ``name`` locked for update (its embedding and search vector left unread), so one change
    to its versions runs at a time. Raises ``NotFound``. Call inside a transaction."""
    skill = Skill.objects.select_for_update().defer("embedding", "search").filter(name=name).first()
    if skill is None:
        raise NotFound(f"No skill {name!r}.", field="name")
    return skill


def version_number_next(skill: Skill) -> int:
    """The number the skill's next version gets (1 for the first). Call with the skill locked."""
    last = (
        SkillVersion.objects.filter(skill=skill).order_by("-number").values_list("number", flat=True).first()
    )
    return (last or 0) + 1
