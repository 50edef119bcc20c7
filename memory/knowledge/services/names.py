"""Entities and predicates: the names facts are made of, checked, found or created (one at a time
or for a whole batch), and a predicate changed by a person in the admin."""

from __future__ import annotations

import json
import re

from django.db import connection, transaction
from django.db.models import F, Func, Value
from django.utils import timezone

from agents.services import system_agent_get
from core.errors import Conflict, InvalidInput, NotFound
from core.tenancy import current_tenant
from memory.episodic.services import decision_record, person_session

from ..models import MAX_ALIASES, PREDICATE_PATTERN, Cardinality, Entity, Predicate, entity_key
from ..selectors import ENTITY_COLUMNS, entities_by_key

MAX_NAME_CHARS = 300


def _check_name(name: str, *, field: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("A name is required.", field=field)
    if len(name) > MAX_NAME_CHARS or "\x00" in name:
        raise InvalidInput(f"At most {MAX_NAME_CHARS} characters, no NUL.", field=field)
    return name


def entity_name_checked(name: str, entity_type: str, *, field: str) -> tuple[str, str]:
    """``(key, spelling)`` of an entity name; raises ``InvalidInput`` (``field``) for a bad name or type."""
    _check_name(name, field=field)
    key = entity_key(name)
    if not key:
        raise InvalidInput("The name has no visible characters.", field=field)
    if len(key) > 1200:  # NFKC can lengthen text (one ligature becomes up to 18 letters)
        raise InvalidInput("The name is too long once normalised.", field=field)
    if not isinstance(entity_type, str) or len(entity_type) > 64 or "\x00" in entity_type:
        raise InvalidInput("An entity type has at most 64 characters.", field=field)
    return key, name.strip()


def _alias_append(entity_id: int, spelling: str) -> None:
    # Appended in SQL, under the row lock: concurrent asserts neither lose a spelling nor pass
    # the bound, and no array is read back and rewritten.
    Entity.objects.filter(pk=entity_id, aliases__len__lt=MAX_ALIASES).exclude(
        aliases__contains=[spelling]
    ).update(aliases=Func(F("aliases"), Value(spelling), function="array_append"))


def entity_ensure(*, name: str, entity_type: str = "", field: str = "subject") -> Entity:
    """The entity whose normalised key matches ``name``, created if new (concurrency-safe); another
    spelling of it is recorded as an alias while it has fewer than ``MAX_ALIASES``."""
    key, spelling = entity_name_checked(name, entity_type, field=field)
    entity, created = Entity.objects.get_or_create(
        key=key, defaults={"name": spelling, "entity_type": entity_type}
    )
    if (
        not created
        and spelling != entity.name
        and spelling not in entity.aliases
        and len(entity.aliases) < MAX_ALIASES
    ):
        _alias_append(entity.pk, spelling)
    return entity


def predicate_name_checked(name: str) -> str:
    """``name`` if it is a predicate's name (``PREDICATE_PATTERN``); raises ``InvalidInput``
    (field ``predicate``)."""
    if not isinstance(name, str) or not re.match(PREDICATE_PATTERN, name):
        raise InvalidInput(
            "Predicates are snake_case: a lowercase letter, then letters, digits or '_' (at most 64).",
            field="predicate",
        )
    return name


def predicate_ensure(*, name: str) -> Predicate:
    """The predicate ``name`` (snake_case), created with the tenant's default cardinality if new.

    Raises ``InvalidInput`` for a name not matching ``[a-z][a-z0-9_]{0,63}``.
    """
    predicate_name_checked(name)
    default = getattr(current_tenant(), "default_predicate_cardinality", Cardinality.ONE)
    predicate, _ = Predicate.objects.get_or_create(name=name, defaults={"cardinality": default})
    return predicate


def predicate_save(
    *, name: str, cardinality: str, description: str, username: str, predicate_id: int | None = None
) -> tuple[Predicate, list[str]]:
    """Create the predicate ``name`` (``predicate_id`` None) or change the cardinality and
    description of predicate ``predicate_id`` (its name is fixed: facts refer to it), as the person
    ``username`` in the admin. Every change is logged as a ``decision`` of the tenant's system agent
    with ``actor`` ``user:<username>``, naming the fields changed with their old and new values.

    Returns ``(predicate, changed field names)``. Raises ``InvalidInput`` for a bad name or
    cardinality, ``NotFound`` for an unknown ``predicate_id``, ``Conflict`` for a name in use.
    """
    if cardinality not in Cardinality.values:
        raise InvalidInput(f"Unknown cardinality {cardinality!r}; use one or many.", field="cardinality")
    with transaction.atomic():
        if predicate_id is None:
            if not re.match(PREDICATE_PATTERN, name or ""):
                raise InvalidInput("Predicates are snake_case, at most 64 characters.", field="name")
            if Predicate.objects.filter(name=name).exists():
                raise Conflict(f"There is already a predicate {name!r}.", field="name")
            predicate = Predicate.objects.create(name=name, cardinality=cardinality, description=description)
            changes = {
                "name": [None, name],
                "cardinality": [None, cardinality],
                "description": [None, description],
            }
        else:
            found = Predicate.objects.select_for_update().filter(pk=predicate_id).first()
            if found is None:
                raise NotFound(f"No predicate {predicate_id}.", field="id")
            predicate = found
            changes = {
                field: [getattr(predicate, field), value]
                for field, value in (("cardinality", cardinality), ("description", description))
                if getattr(predicate, field) != value
            }
            if not changes:
                return predicate, []
            predicate.cardinality, predicate.description = cardinality, description
            predicate.full_clean()
            predicate.save(update_fields=list(changes))
        action = "predicate_create" if predicate_id is None else "predicate_update"
        decision_record(
            agent=system_agent_get(),
            session_id=person_session(username),
            actor=f"user:{username}",
            content=f"{username} {'created' if predicate_id is None else 'changed'} predicate {predicate.name}: "
            + ", ".join(f"{field} {old!r} → {new!r}" for field, (old, new) in changes.items()),
            payload={"action": action, "predicate": predicate.name, "changes": changes},
        )
    return predicate, list(changes)


def entities_ensure(mentions: list[tuple[str, str, str]]) -> dict[str, Entity]:
    """``entity_ensure`` for every ``(key, spelling, type)`` in order, in three statements plus one
    per new alias: the first mention of a new key creates it (its spelling and type), every later
    spelling of an entity is an alias while it has fewer than ``MAX_ALIASES``. Returns entities by key."""
    keys = list(dict.fromkeys(key for key, _, _ in mentions))
    by_key = entities_by_key(keys)
    created: set[str] = set()
    new: dict[str, Entity] = {}
    for key, spelling, entity_type in mentions:
        if key not in by_key and key not in new:
            new[key] = Entity(key=key, name=spelling, entity_type=entity_type)
    if new:
        # ON CONFLICT DO NOTHING waits for a concurrent creator and then leaves its row (as
        # get_or_create does); the rows this statement made come back with their ids, a concurrent
        # creator's are read after it. The rows travel as one JSON document (one parameter)
        now = timezone.now()
        rows = [{"key": e.key, "name": e.name, "entity_type": e.entity_type} for e in new.values()]
        with connection.cursor() as cursor:
            cursor.execute(_ENTITY_INSERT_SQL, [now, json.dumps(rows)])
            made = dict(cursor.fetchall())
        alias = connection.alias
        for key, pk in made.items():
            entity = new[key]
            by_key[key] = Entity.from_db(
                alias, ENTITY_COLUMNS, [pk, entity.name, key, entity.entity_type, [], now]
            )
        created = set(made)
        others = [key for key in new if key not in made]
        if others:
            by_key.update(entities_by_key(others))
    first_seen: set[str] = set()
    for key, spelling, _ in mentions:
        entity = by_key[key]
        if key in created and key not in first_seen:
            first_seen.add(key)  # the mention that created it, like entity_ensure's created branch
            continue
        first_seen.add(key)
        if spelling != entity.name and spelling not in entity.aliases and len(entity.aliases) < MAX_ALIASES:
            _alias_append(entity.pk, spelling)
            entity.aliases = [*entity.aliases, spelling]
    return by_key


_ENTITY_INSERT_SQL = f"""
    INSERT INTO {Entity._meta.db_table} (name, key, entity_type, aliases, created_at)
    SELECT r.name, r.key, r.entity_type, '{{}}', %s
    FROM ROWS FROM (jsonb_to_recordset(%s::jsonb) AS (key text, name text, entity_type text))
        WITH ORDINALITY AS r(key, name, entity_type, n)
    ORDER BY r.n
    ON CONFLICT (key) DO NOTHING
    RETURNING key, id
"""


def predicates_ensure(names: list[str]) -> dict[str, Predicate]:
    """``predicate_ensure`` for every name (new ones with the tenant's default cardinality)."""
    wanted = list(dict.fromkeys(names))
    found = {p.name: p for p in Predicate.objects.filter(name__in=wanted)}
    missing = [n for n in wanted if n not in found]
    if missing:
        default = getattr(current_tenant(), "default_predicate_cardinality", Cardinality.ONE)
        Predicate.objects.bulk_create(
            [Predicate(name=n, cardinality=default) for n in missing], ignore_conflicts=True
        )
        found.update({p.name: p for p in Predicate.objects.filter(name__in=missing)})
    return found
