"""Writes to the knowledge layer: asserting, retracting, and resolving contradictions.

Every change to a fact adds a ``GraphOutbox`` row in the same transaction and queues the Celery task
that projects it into Neo4j once the transaction commits (best effort: see ``core.tasks``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal

from django.db import connection, transaction
from django.db.models import F, Func, Q, Value
from django.db.models.expressions import RawSQL
from django.utils import timezone

from agents.models import Agent
from agents.services import system_agent_get
from core.bulk import rows_insert
from core.errors import Conflict, DomainError, InvalidInput, NotFound, PermissionDenied
from core.locks import advisory_xact_lock, advisory_xact_locks
from core.tasks import queue_on_commit
from core.tenancy import current_tenant
from memory.episodic.models import Event, EventKind, EventRole
from memory.episodic.services import EventData, agent_session, decision_record, events_append, person_session

from .models import (
    LIVE_STATUSES,
    MAX_ALIASES,
    PREDICATE_PATTERN,
    Cardinality,
    Contradiction,
    ContradictionStatus,
    Entity,
    Fact,
    FactProvenance,
    FactStatus,
    GraphOutbox,
    LiteralType,
    Predicate,
    Resolution,
    entity_key,
)
from .projection import projection_enabled

MAX_NAME_CHARS = 300
MAX_LITERAL_CHARS = 2000


@dataclass(frozen=True)
class FactObject:
    """The object of a fact: an entity (``entity`` name) or a literal (``literal_type`` + ``value``)."""

    entity: str | None = None
    entity_type: str = ""
    literal_type: str = ""
    value: Any = None
    entity_id: int | None = None  # as a response gave it back: must be the named entity's id

    @classmethod
    def from_wire(cls, data: Any) -> FactObject:
        """The object in its JSON form: ``{"entity": "Acme", "type"?: "company", "id"?: 7}`` or
        exactly one literal ``{"string"|"number"|"date"|"boolean": v}`` (values are checked by
        ``fact_assert``). Raises ``InvalidInput`` (field ``object``) for another shape."""
        if not isinstance(data, dict):
            raise InvalidInput(
                'Expected an object such as {"entity": "Acme"} or {"number": 3}.', field="object"
            )
        kinds = [k for k in data if k in OBJECT_KINDS]
        unknown = [k for k in data if k not in (*OBJECT_KINDS, "type", "id")]
        if unknown or len(kinds) != 1 or (("type" in data or "id" in data) and kinds != ["entity"]):
            raise InvalidInput(
                f"Give exactly one of {', '.join(OBJECT_KINDS)} (and 'type' or 'id' only with 'entity').",
                field="object",
            )
        kind = kinds[0]
        if kind == "entity":
            name, entity_type, entity_id = data["entity"], data.get("type") or "", data.get("id")
            if not isinstance(name, str) or not isinstance(entity_type, str):
                raise InvalidInput("'entity' and 'type' are strings.", field="object")
            if entity_id is not None and (isinstance(entity_id, bool) or not isinstance(entity_id, int)):
                raise InvalidInput("'id' is an integer.", field="object")
            return cls(entity=name, entity_type=entity_type, entity_id=entity_id)
        return cls(literal_type=kind, value=data[kind])

    def to_wire(self) -> dict[str, Any]:
        """The JSON form ``from_wire`` reads (an entity's type only when it has one)."""
        if self.entity is not None:
            return {"entity": self.entity, **({"type": self.entity_type} if self.entity_type else {})}
        return {self.literal_type: self.value}


OBJECT_KINDS = ("entity", *LiteralType.values)


@dataclass(frozen=True)
class FactData:
    """One assertion. ``valid_from`` defaults to now; ``confidence`` is in [0, 1]."""

    subject: str
    predicate: str
    object: FactObject
    confidence: float = 1.0
    valid_from: datetime | None = None
    session_id: str = ""
    source_event_id: int | None = None
    subject_type: str = ""
    data_subject: str = ""


@dataclass(frozen=True)
class AssertResult:
    """``created`` (a new active fact), ``reinforced`` (the same live fact again) or ``disputed``
    (a new fact contradicting an active one, with the open ``contradiction``)."""

    fact: Fact
    outcome: Literal["created", "reinforced", "disputed"]
    contradiction: Contradiction | None = None


def _check_name(name: str, *, field: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("A name is required.", field=field)
    if len(name) > MAX_NAME_CHARS or "\x00" in name:
        raise InvalidInput(f"At most {MAX_NAME_CHARS} characters, no NUL.", field=field)
    return name


def _entity_name_checked(name: str, entity_type: str, *, field: str) -> tuple[str, str]:
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
    key, spelling = _entity_name_checked(name, entity_type, field=field)
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


def _predicate_name_checked(name: str) -> str:
    import re

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
    _predicate_name_checked(name)
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
            import re

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


def literal_canonical(literal_type: str, value: Any) -> tuple[Any, str]:
    """Validate a literal; return ``(value to store, object_key)``. Raises ``InvalidInput`` (field ``object``)."""

    def bad(message: str) -> InvalidInput:
        return InvalidInput(message, field="object")

    if literal_type == LiteralType.STRING:
        if not isinstance(value, str) or not value or len(value) > MAX_LITERAL_CHARS or "\x00" in value:
            raise bad(
                f"A string literal is a non-empty JSON string of at most {MAX_LITERAL_CHARS} characters."
            )
        return value, f"string:{value}"
    if literal_type == LiteralType.NUMBER:
        try:
            as_float = (
                float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
            )
        except OverflowError:  # a JSON integer beyond a double's range
            as_float = None
        if as_float is None or not math.isfinite(as_float):
            raise bad("A number literal is a finite JSON number (within ±1.8e308).")
        return value, f"number:{as_float!r}"
    if literal_type == LiteralType.DATE:
        try:
            parsed = date.fromisoformat(value) if isinstance(value, str) and len(value) == 10 else None
        except ValueError:
            parsed = None
        if parsed is None:
            raise bad("A date literal is a string YYYY-MM-DD.")
        return parsed.isoformat(), f"date:{parsed.isoformat()}"
    if literal_type == LiteralType.BOOLEAN:
        if not isinstance(value, bool):
            raise bad("A boolean literal is true or false.")
        return value, f"boolean:{'true' if value else 'false'}"
    raise bad(f"Unknown literal type {literal_type!r}; use string, number, date or boolean.")


def _queue_projection(facts: list[Fact]) -> None:
    # one row per fact in one statement, without a model instance each (a batch of 500: 500
    # instances and 1,500 field conversions for three columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {GraphOutbox._meta.db_table} (fact_id, created_at) SELECT f, %s FROM unnest(%s::bigint[]) f",
            [timezone.now(), [f.pk for f in facts]],
        )
    # One task per transaction: it drains the tenant's whole outbox. Without this a batch of 500
    # asserts (POST /api/v1/facts) published 500 identical tasks at commit, a few ms each
    # (benchmarks/knowledge_graph.py). Best effort: with the broker down the write still succeeds
    # and the outbox sweeper projects it later.
    queue_on_commit("memory.knowledge.tasks.project_facts", once_per_transaction=True)


def projection_state() -> Literal["pending", "none"]:
    """What fact writes answer about the Neo4j projection of their change: ``"pending"`` (queued in
    the outbox; a worker projects it, the sweeper within ``ENGRAM_OUTBOX_SWEEP_SECONDS`` at the
    latest) or ``"none"`` (no ``NEO4J_URI``: nothing is projected)."""
    return "pending" if projection_enabled() else "none"


def _lock_subject_predicate(subject: Entity, predicate: Predicate) -> None:
    """Serialise asserts on one (subject, predicate) for the transaction (they are what may conflict)."""
    advisory_xact_lock("fact", subject.pk, predicate.pk)


class FactRetracted(Conflict):
    """``fact_assert(refuse_retracted=True)`` met a retracted fact with the same subject, predicate
    and object: a job does not bring it back."""


def fact_assert(*, agent: Agent, data: FactData, refuse_retracted: bool = False) -> AssertResult:
    """Record that ``agent`` holds ``data`` true.

    - The same live fact (subject, predicate, object) again: reinforced (confidence = max, one more
      provenance row).
    - A ``one`` predicate whose subject has an active fact with another object: the new fact is
      ``disputed`` and one open ``Contradiction`` links the two; the existing fact stays active.
    - Otherwise a new active fact.

    Asserts on the same (subject, predicate) are serialised, so two agents asserting conflicting
    facts at the same moment yield exactly one contradiction. Raises ``InvalidInput`` for bad names,
    predicates, literals, confidence, a naive ``valid_from`` or an unknown source event, and, with
    ``refuse_retracted`` (background jobs), ``FactRetracted`` when the same fact was retracted.
    """
    if isinstance(data.confidence, bool) or not (0.0 <= data.confidence <= 1.0):
        raise InvalidInput("confidence must be between 0 and 1.", field="confidence")
    valid_from = data.valid_from or timezone.now()
    if timezone.is_naive(valid_from):
        raise InvalidInput("valid_from must include a timezone.", field="valid_from")
    obj = data.object
    with transaction.atomic():
        subject = entity_ensure(name=data.subject, entity_type=data.subject_type, field="subject")
        predicate = predicate_ensure(name=data.predicate)
        if obj.entity is not None:
            if obj.literal_type:
                raise InvalidInput("Give either an entity or a literal as the object.", field="object")
            object_entity = entity_ensure(name=obj.entity, entity_type=obj.entity_type, field="object")
            if obj.entity_id is not None and obj.entity_id != object_entity.pk:
                raise InvalidInput(
                    f"Entity {obj.entity!r} has id {object_entity.pk}, not {obj.entity_id}.",
                    field="object.id",
                )
            literal_value, object_key = None, f"e:{object_entity.pk}"
        else:
            object_entity = None
            literal_value, object_key = literal_canonical(obj.literal_type, obj.value)
        source_event = None
        if data.source_event_id is not None:
            source_event = Event.objects.filter(pk=data.source_event_id).first()
            if source_event is None:
                raise InvalidInput(
                    f"No event {data.source_event_id} in this tenant.", field="source_event_id"
                )

        _lock_subject_predicate(subject, predicate)
        if (
            refuse_retracted
            and Fact.objects.filter(
                subject=subject, predicate=predicate, object_key=object_key, status=FactStatus.RETRACTED
            ).exists()
        ):
            raise FactRetracted("This fact was retracted.", field="object")
        provenance = FactProvenance(
            agent=agent, session_id=data.session_id, source_event=source_event, confidence=data.confidence
        )
        same = Fact.objects.filter(
            subject=subject, predicate=predicate, object_key=object_key, status__in=LIVE_STATUSES
        ).first()
        if same is not None:
            if data.confidence > same.confidence:
                same.confidence = data.confidence
                same.save(update_fields=["confidence"])
            provenance.fact = same
            provenance.save()
            _queue_projection([same])
            return AssertResult(same, "reinforced")

        fact = Fact(
            subject=subject,
            predicate=predicate,
            object_entity=object_entity,
            literal_type="" if object_entity else obj.literal_type,
            literal_value=literal_value,
            object_key=object_key,
            confidence=data.confidence,
            valid_from=valid_from,
            agent=agent,
            session_id=data.session_id,
            source_event=source_event,
            data_subject=data.data_subject,
        )
        existing = None
        if predicate.cardinality == Cardinality.ONE:
            existing = (
                Fact.objects.filter(subject=subject, predicate=predicate, status=FactStatus.ACTIVE)
                .exclude(object_key=object_key)
                .order_by("recorded_at", "id")
                .first()
            )
        if existing is not None:
            fact.status = FactStatus.DISPUTED
        fact.save()
        provenance.fact = fact
        provenance.save()
        contradiction = None
        if existing is not None:
            contradiction = Contradiction.objects.create(existing_fact=existing, new_fact=fact)
        _queue_projection([fact])
    return AssertResult(fact, "disputed" if contradiction else "created", contradiction)


def facts_assert(*, agent: Agent, facts: Sequence[FactData], batch: bool) -> list[AssertResult]:
    """What ``POST /api/v1/facts`` runs: one fact (``batch`` False: ``fact_assert``, errors name
    its fields) or an array, even of one (``batch``: ``facts_assert_batch``, errors name
    ``facts[<index>].<field>``). Raises what those raise."""
    if not batch:
        with transaction.atomic():
            return [fact_assert(agent=agent, data=data) for data in facts]
    return facts_assert_batch(agent=agent, facts=facts)


@dataclass
class _Prepared:
    """One item of a batch once its names and literal are checked (before any query)."""

    data: FactData
    valid_from: datetime
    subject_key: str
    object_entity_key: str | None
    literal_value: Any
    object_key: str  # for an entity object: filled in once its id is known


def _prepare(data: FactData) -> _Prepared:
    """``fact_assert``'s checks that need no query, in its order. Raises ``InvalidInput``."""
    if isinstance(data.confidence, bool) or not (0.0 <= data.confidence <= 1.0):
        raise InvalidInput("confidence must be between 0 and 1.", field="confidence")
    valid_from = data.valid_from or timezone.now()
    if timezone.is_naive(valid_from):
        raise InvalidInput("valid_from must include a timezone.", field="valid_from")
    subject_key, _ = _entity_name_checked(data.subject, data.subject_type, field="subject")
    _predicate_name_checked(data.predicate)
    obj = data.object
    if obj.entity is not None:
        if obj.literal_type:
            raise InvalidInput("Give either an entity or a literal as the object.", field="object")
        object_entity_key, _ = _entity_name_checked(obj.entity, obj.entity_type, field="object")
        return _Prepared(data, valid_from, subject_key, object_entity_key, None, "")
    literal_value, object_key = literal_canonical(obj.literal_type, obj.value)
    return _Prepared(data, valid_from, subject_key, None, literal_value, object_key)


def _entities_ensure(mentions: list[tuple[str, str, str]]) -> dict[str, Entity]:
    """``entity_ensure`` for every ``(key, spelling, type)`` in order, in three statements plus one
    per new alias: the first mention of a new key creates it (its spelling and type), every later
    spelling of an entity is an alias while it has fewer than ``MAX_ALIASES``. Returns entities by key."""
    keys = list(dict.fromkeys(key for key, _, _ in mentions))
    by_key = _entities_by_key(keys)
    created: set[str] = set()
    new: dict[str, Entity] = {}
    for key, spelling, entity_type in mentions:
        if key not in by_key and key not in new:
            new[key] = Entity(key=key, name=spelling, entity_type=entity_type)
    if new:
        # ON CONFLICT DO NOTHING waits for a concurrent creator and then leaves its row (as
        # get_or_create does); the rows this statement made come back with their ids, a concurrent
        # creator's are read after it. One JSON document instead of ``bulk_create``'s placeholders
        # (four a row, compiled by the ORM: 0.3 s of a batch of 500 new facts, profiled)
        now = timezone.now()
        rows = [{"key": e.key, "name": e.name, "entity_type": e.entity_type} for e in new.values()]
        with connection.cursor() as cursor:
            cursor.execute(_ENTITY_INSERT_SQL, [now, json.dumps(rows)])
            made = dict(cursor.fetchall())
        alias = connection.alias
        for key, pk in made.items():
            entity = new[key]
            by_key[key] = Entity.from_db(
                alias, _ENTITY_LOADED, [pk, entity.name, key, entity.entity_type, [], now]
            )
        created = set(made)
        others = [key for key in new if key not in made]
        if others:
            by_key.update(_entities_by_key(others))
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


_ENTITY_LOADED = ("id", "name", "key", "entity_type", "aliases", "created_at")  # Entity's columns, in order
_ENTITY_SELECT_SQL = f"SELECT {', '.join(_ENTITY_LOADED)} FROM {Entity._meta.db_table} WHERE key = ANY(%s)"


def _entities_by_key(keys: list[str]) -> dict[str, Entity]:
    """The stored entities among ``keys``, by key: one array parameter (``key__in`` bound one
    placeholder per key, which the ORM compiled and psycopg quoted one by one)."""
    with connection.cursor() as cursor:
        cursor.execute(_ENTITY_SELECT_SQL, [keys])
        rows = cursor.fetchall()
    alias = connection.alias
    return {row[2]: Entity.from_db(alias, _ENTITY_LOADED, row) for row in rows}


_ENTITY_INSERT_SQL = f"""
    INSERT INTO {Entity._meta.db_table} (name, key, entity_type, aliases, created_at)
    SELECT r.name, r.key, r.entity_type, '{{}}', %s
    FROM ROWS FROM (jsonb_to_recordset(%s::jsonb) AS (key text, name text, entity_type text))
        WITH ORDINALITY AS r(key, name, entity_type, n)
    ORDER BY r.n
    ON CONFLICT (key) DO NOTHING
    RETURNING key, id
"""


def _predicates_ensure(names: list[str]) -> dict[str, Predicate]:
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


def facts_assert_batch(
    *,
    agent: Agent,
    facts: Sequence[FactData],
    refuse_retracted: bool = False,
    field_prefix: str = "facts",
) -> list[AssertResult]:
    """Assert ``facts`` for ``agent`` in order, all or nothing, in one transaction: the same
    outcome, item by item, as calling ``fact_assert`` on each in turn (an item sees the ones before
    it), in a bounded number of statements instead of about ten per fact.

    - The same live fact (subject, predicate, object) as a stored one or an earlier item:
      ``reinforced`` (confidence = max, one more provenance row).
    - A ``one`` predicate whose subject has an active fact with another object, stored or from an
      earlier item: ``disputed``, with one open ``Contradiction`` against the oldest such fact
      (``recorded_at``, ``id``); that fact stays active.
    - Otherwise ``created`` (active).
    - ``refuse_retracted`` (background jobs such as promotion): an item whose fact was retracted
      raises ``FactRetracted`` and nothing of the batch is written.

    Entities and predicates are made as ``entity_ensure`` / ``predicate_ensure`` make them; the
    (subject, predicate) locks of every item are taken in one statement (hash order, so two batches
    never deadlock) before the facts are read. One outbox row per fact touched and one projection
    task per batch (queued on commit). The batch is recorded as one ``decision`` per session of its
    items (an item without a session: the agent's ``agent:<name>``), naming the outcome counts, the
    fact ids created, reinforced and disputed and the contradictions opened.

    Returns one ``AssertResult`` per item, in order. Raises ``InvalidInput`` (empty batch, bad
    names, predicates, literals, confidence, naive ``valid_from``, unknown source event, an
    ``object.id`` that is not the entity's) and ``FactRetracted``; an error's field is
    ``<field_prefix>[<index>].<field>`` of the first failing item.
    """
    if not facts:
        raise InvalidInput("At least one fact is required.", field=field_prefix)

    def at(index: int, exc: DomainError) -> DomainError:
        exc.field = f"{field_prefix}[{index}].{exc.field}" if exc.field else f"{field_prefix}[{index}]"
        return exc

    prepared: list[_Prepared] = []
    for index, data in enumerate(facts):
        try:
            prepared.append(_prepare(data))
        except DomainError as exc:
            raise at(index, exc) from None

    with transaction.atomic():
        mentions: list[tuple[str, str, str]] = []
        for item in prepared:
            mentions.append((item.subject_key, item.data.subject.strip(), item.data.subject_type))
            if item.object_entity_key is not None:
                obj = item.data.object
                mentions.append((item.object_entity_key, str(obj.entity).strip(), obj.entity_type))
        entities = _entities_ensure(mentions)
        predicates = _predicates_ensure([item.data.predicate for item in prepared])
        event_ids = {item.data.source_event_id for item in prepared if item.data.source_event_id is not None}
        known_events = (
            set(Event.objects.filter(pk__in=event_ids).values_list("pk", flat=True)) if event_ids else set()
        )
        for index, item in enumerate(prepared):
            obj = item.data.object
            if item.object_entity_key is not None:
                named = entities[item.object_entity_key]
                if obj.entity_id is not None and obj.entity_id != named.pk:
                    raise at(
                        index,
                        InvalidInput(
                            f"Entity {obj.entity!r} has id {named.pk}, not {obj.entity_id}.",
                            field="object.id",
                        ),
                    )
                item.object_key = f"e:{named.pk}"
            if item.data.source_event_id is not None and item.data.source_event_id not in known_events:
                raise at(
                    index,
                    InvalidInput(
                        f"No event {item.data.source_event_id} in this tenant.", field="source_event_id"
                    ),
                )

        pairs = sorted({(entities[i.subject_key].pk, predicates[i.data.predicate].pk) for i in prepared})
        advisory_xact_locks("fact", (f"{s}:{p}" for s, p in pairs))  # the names fact_assert locks
        # one index probe per pair (fact_subject_pred_idx); a 500-way OR of Q objects cost more to
        # build in the ORM than the query took to run
        in_pairs = RawSQL(
            "SELECT id FROM memory_fact WHERE (subject_id, predicate_id) IN "
            "(SELECT * FROM unnest(%s::bigint[], %s::bigint[]))",
            ([s for s, _ in pairs], [p for _, p in pairs]),
        )
        known: dict[tuple[int, int], list[Fact]] = {pair: [] for pair in pairs}
        for stored in Fact.objects.filter(
            pk__in=in_pairs, status__in=[*LIVE_STATUSES, FactStatus.RETRACTED]
        ).order_by("recorded_at", "id"):
            known[(stored.subject_id, stored.predicate_id)].append(stored)

        results: list[AssertResult] = []
        new_facts: list[Fact] = []
        raised: dict[int, Fact] = {}  # stored facts whose confidence went up
        provenance: list[FactProvenance] = []
        opened: list[Contradiction] = []
        for index, item in enumerate(prepared):
            data, subject, predicate = item.data, entities[item.subject_key], predicates[item.data.predicate]
            here = known[(subject.pk, predicate.pk)]
            if refuse_retracted and any(
                f.status == FactStatus.RETRACTED and f.object_key == item.object_key for f in here
            ):
                raise at(index, FactRetracted("This fact was retracted.", field="object"))
            row = FactProvenance(
                agent=agent,
                session_id=data.session_id,
                source_event_id=data.source_event_id,
                confidence=data.confidence,
            )
            same = next(
                (f for f in here if f.object_key == item.object_key and f.status in LIVE_STATUSES), None
            )
            if same is not None:
                if data.confidence > same.confidence:
                    same.confidence = data.confidence
                    if same.pk is not None:
                        raised[same.pk] = same
                row.fact = same
                provenance.append(row)
                results.append(AssertResult(same, "reinforced"))
                continue
            object_entity = entities[item.object_entity_key] if item.object_entity_key is not None else None
            fact = Fact(
                subject=subject,
                predicate=predicate,
                object_entity=object_entity,
                literal_type="" if object_entity else data.object.literal_type,
                literal_value=item.literal_value,
                object_key=item.object_key,
                confidence=data.confidence,
                valid_from=item.valid_from,
                agent=agent,
                session_id=data.session_id,
                source_event_id=data.source_event_id,
                data_subject=data.data_subject,
            )
            existing = None
            if predicate.cardinality == Cardinality.ONE:
                existing = next(
                    (f for f in here if f.status == FactStatus.ACTIVE and f.object_key != item.object_key),
                    None,
                )
            contradiction = None
            if existing is not None:
                fact.status = FactStatus.DISPUTED
                contradiction = Contradiction(existing_fact=existing, new_fact=fact)
                opened.append(contradiction)
            here.append(fact)
            new_facts.append(fact)
            row.fact = fact
            provenance.append(row)
            results.append(AssertResult(fact, "disputed" if contradiction else "created", contradiction))

        rows_insert(new_facts)  # ids come back (RETURNING)
        if raised:
            Fact.objects.bulk_update(list(raised.values()), ["confidence"])
        rows_insert(provenance)
        rows_insert(opened)
        _queue_projection(list({r.fact.pk: r.fact for r in results}.values()))
        _record_batch(
            agent=agent,
            results=results,
            groups=[(item.data.session_id, item.data.data_subject) for item in prepared],
        )
    return results


def _record_batch(*, agent: Agent, results: list[AssertResult], groups: list[tuple[str, str]]) -> None:
    """One ``decision`` per (session, data subject) of a batch's items (what the batch did there),
    appended in one ``events_append``: a ``decision_record`` per session locked and moved the chain
    head once each, three statements a session (13 sessions: 39 of a batch's 77 statements). The
    decision about a data subject's facts carries that subject, so erasing the subject redacts it
    with them."""
    by_group: dict[tuple[str, str], list[AssertResult]] = {}
    for result, (session_id, data_subject) in zip(results, groups, strict=True):
        by_group.setdefault((session_id or agent_session(agent), data_subject), []).append(result)
    now = timezone.now()
    decisions = []
    for (session_id, data_subject), mine in by_group.items():
        ids = {
            outcome: sorted({r.fact.pk for r in mine if r.outcome == outcome})
            for outcome in ("created", "reinforced", "disputed")
        }
        decisions.append(
            # what decision_record appends, for many sessions at once
            EventData(
                session_id=session_id,
                kind=EventKind.DECISION,
                role=EventRole.SYSTEM,
                content=(
                    f"Asserted {len(mine)} fact(s): {len(ids['created'])} created, "
                    f"{len(ids['reinforced'])} reinforced, {len(ids['disputed'])} disputed."
                ),
                payload={
                    "action": "facts_assert_batch",
                    "count": len(mine),
                    "facts": ids,
                    "contradictions_opened": [
                        r.contradiction.pk for r in mine if r.contradiction is not None
                    ],
                },
                occurred_at=now,
                data_subject=data_subject,
            )
        )
    events_append(agent=agent, events=decisions)


def _disputes_settle(facts: Sequence[Fact]) -> tuple[list[Fact], list[Contradiction]]:
    """Bring ``facts`` back in line with the rule that a fact is ``disputed`` exactly while an open
    contradiction names it as the new fact, after contradictions on them closed. Each disputed fact
    no open contradiction names any more (oldest first) is judged as ``fact_assert`` would judge
    it now: disputed again, by a new open contradiction, when its subject holds another object as
    active on a ``one`` predicate (and that pair was not decided already); otherwise active.
    Returns ``(facts made active, contradictions opened)``; the caller records them. Call inside
    the transaction that closed the contradictions."""
    made_active: list[Fact] = []
    opened: list[Contradiction] = []
    for fact in sorted({f.pk: f for f in facts}.values(), key=lambda f: (f.recorded_at, f.pk)):
        fact.refresh_from_db(fields=["status"])
        if fact.status != FactStatus.DISPUTED:
            continue
        advisory_xact_lock("fact", fact.subject_id, fact.predicate_id)  # as fact_assert takes it
        if Contradiction.objects.filter(new_fact=fact, status=ContradictionStatus.OPEN).exists():
            continue
        holder = None
        if Predicate.objects.filter(pk=fact.predicate_id, cardinality=Cardinality.ONE).exists():
            holder = (
                Fact.objects.filter(
                    subject_id=fact.subject_id, predicate_id=fact.predicate_id, status=FactStatus.ACTIVE
                )
                .exclude(object_key=fact.object_key)
                .order_by("recorded_at", "id")
                .first()
            )
        if (
            holder is not None
            and not Contradiction.objects.filter(existing_fact=holder, new_fact=fact).exists()
        ):
            opened.append(Contradiction.objects.create(existing_fact=holder, new_fact=fact))
            continue
        fact.status = FactStatus.ACTIVE
        fact.save(update_fields=["status"])
        made_active.append(fact)
    return made_active, opened


def fact_retract(
    *,
    agent: Agent,
    fact_id: int | str,
    reason: str = "",
    may_curate: bool = False,
    session_id: str | None = None,
) -> Fact:
    """An agent withdraws a fact: status ``retracted``, open contradictions on it dismissed (the
    facts that disputed it settled by ``_disputes_settle``: active, or disputing the fact their
    subject now holds), a ``decision`` event logged in the fact's session (for a fact asserted
    without one: the request's ``session_id``, else the agent's ``agent:<name>`` session), naming
    the facts whose status changed and linked from the contradictions it closed
    (``decision_event``). Only the fact's author (the agent that first asserted it) may, or a key
    with the ``curate`` scope (``may_curate``). Raises ``NotFound`` for an unknown or malformed id,
    ``PermissionDenied`` for another agent's fact, ``Conflict`` if not live."""
    if isinstance(fact_id, str):
        if not fact_id.isdigit() or len(fact_id) > 18:
            raise NotFound(f"No fact {fact_id}.", field="id")
        fact_id = int(fact_id)
    with transaction.atomic():
        fact = Fact.objects.select_for_update().filter(pk=fact_id).first()
        if fact is None:
            raise NotFound(f"No fact {fact_id}.", field="id")
        if fact.agent_id != agent.pk and not may_curate:
            raise PermissionDenied(
                f"Fact {fact_id} was asserted by another agent: only its author, or a key with the "
                "'curate' scope, may retract it.",
                field="id",
            )
        if fact.status not in LIVE_STATUSES:
            raise Conflict(f"Fact {fact_id} is already {fact.status}.", field="id")
        fact.status, fact.ended_at = FactStatus.RETRACTED, timezone.now()
        fact.save(update_fields=["status", "ended_at"])
        open_ones = Contradiction.objects.filter(
            Q(existing_fact=fact) | Q(new_fact=fact), status=ContradictionStatus.OPEN
        )
        dismissed = list(open_ones.values_list("pk", flat=True))
        challengers = [c.new_fact for c in open_ones.filter(existing_fact=fact).select_related("new_fact")]
        open_ones.update(
            status=ContradictionStatus.DISMISSED,
            resolved_at=timezone.now(),
            note=f"fact #{fact_id} was retracted by {agent.name}",
        )
        made_active, opened = _disputes_settle(challengers)
        _queue_projection([fact, *made_active])
        decision = decision_record(
            agent=agent,
            session_id=fact.session_id or session_id or agent_session(agent),
            content=f"Retracted fact #{fact.pk}: {fact}.",
            payload={
                "action": "fact_retract",
                "fact_id": fact.pk,
                "reason": reason,
                "contradictions_dismissed": dismissed,
                "facts_changed": {str(f.pk): str(f.status) for f in made_active},
                "contradictions_opened": [c.pk for c in opened],
            },
        )
        Contradiction.objects.filter(pk__in=dismissed).update(decision_event=decision)
    return fact


def contradiction_resolve(
    *, contradiction_id: int, resolution: str, reviewer: str, note: str = ""
) -> Contradiction:
    """Decide an open contradiction (by a person in the admin, ``reviewer`` their username).

    - ``accept_new``: the existing fact is ``superseded`` with ``valid_to`` = the new fact's
      ``valid_from``; the new one becomes active; other open contradictions against the superseded
      fact are moved onto the new one.
    - ``keep_existing``: the new fact is ``retracted``.
    - ``both_valid``: the predicate becomes ``many``; both facts active; every other open
      contradiction on the predicate is dismissed and its disputed fact made active.
    - ``dismiss``: not a contradiction: closed, and the new fact stands beside the existing one
      (active; the predicate is unchanged).

    Whatever the resolution, no fact is left ``disputed`` without an open contradiction naming it
    (``_disputes_settle``). Writes a ``decision`` event naming the facts whose status changed, and
    links it from every contradiction it closed (``decision_event``). Raises ``NotFound``,
    ``Conflict`` (not open) or ``InvalidInput``.
    """
    if resolution not in Resolution.values:
        raise InvalidInput(f"Unknown resolution {resolution!r}.", field="resolution")
    now = timezone.now()
    with transaction.atomic():
        contradiction = (
            Contradiction.objects.select_for_update()
            .select_related("existing_fact__predicate", "new_fact")
            .filter(pk=contradiction_id)
            .first()
        )
        if contradiction is None:
            raise NotFound(f"No contradiction {contradiction_id}.", field="id")
        if contradiction.status != ContradictionStatus.OPEN:
            raise Conflict(f"Contradiction {contradiction_id} is already {contradiction.status}.", field="id")
        old, new = contradiction.existing_fact, contradiction.new_fact
        changed: list[Fact] = []
        dismissed: list[int] = []
        if resolution == Resolution.ACCEPT_NEW:
            old.status, old.valid_to = FactStatus.SUPERSEDED, max(new.valid_from, old.valid_from)
            new.status = FactStatus.ACTIVE
            changed = [old, new]
            for other in Contradiction.objects.filter(
                existing_fact=old, status=ContradictionStatus.OPEN
            ).exclude(pk=contradiction.pk):
                other.status, other.resolved_at, other.reviewer = ContradictionStatus.DISMISSED, now, reviewer
                other.note = f"moved onto fact #{new.pk} when #{contradiction.pk} accepted it"
                other.save(update_fields=["status", "resolved_at", "reviewer", "note"])
                Contradiction.objects.get_or_create(existing_fact=new, new_fact=other.new_fact)
                dismissed.append(other.pk)
        elif resolution == Resolution.KEEP_EXISTING:
            new.status = FactStatus.RETRACTED
            changed = [new]
        elif resolution == Resolution.BOTH_VALID:
            predicate = old.predicate
            predicate.cardinality = Cardinality.MANY
            predicate.save(update_fields=["cardinality"])
            new.status = FactStatus.ACTIVE
            changed = [new]
            others = Contradiction.objects.filter(
                new_fact__predicate=predicate, status=ContradictionStatus.OPEN
            )
            for other in others.exclude(pk=contradiction.pk).select_related("new_fact"):
                other.status, other.resolved_at, other.reviewer = ContradictionStatus.DISMISSED, now, reviewer
                other.note = f"predicate {predicate.name} made 'many' by #{contradiction.pk}"
                other.save(update_fields=["status", "resolved_at", "reviewer", "note"])
                if other.new_fact.status == FactStatus.DISPUTED:
                    other.new_fact.status = FactStatus.ACTIVE
                    other.new_fact.save(update_fields=["status"])
                    changed.append(other.new_fact)
                dismissed.append(other.pk)
        for fact in {f.pk: f for f in changed}.values():
            fact.ended_at = None if fact.status in LIVE_STATUSES else now  # retention counts from here
            fact.save(update_fields=["status", "valid_to", "ended_at"])
        contradiction.status = (
            ContradictionStatus.DISMISSED
            if resolution == Resolution.DISMISS
            else ContradictionStatus.RESOLVED
        )
        contradiction.resolution, contradiction.reviewer = resolution, reviewer
        contradiction.resolved_at, contradiction.note = now, note
        contradiction.save()
        also = Contradiction.objects.filter(pk__in=dismissed).select_related("new_fact")
        made_active, opened = _disputes_settle([new, *(c.new_fact for c in also)])
        changed += made_active
        if changed:
            _queue_projection(changed)
        decision = decision_record(
            agent=system_agent_get(),
            # the session the disputed fact came from; a person's own session when neither fact has one
            session_id=new.session_id or old.session_id or person_session(reviewer),
            actor=f"user:{reviewer}",
            content=f"{reviewer} resolved contradiction #{contradiction.pk} ({resolution}): "
            f"'{old}' vs '{new}'." + (f" Note: {note}" if note else ""),
            payload={
                "action": "contradiction_resolve",
                "contradiction_id": contradiction.pk,
                "resolution": resolution,
                "reviewer": reviewer,
                "note": note,
                "existing_fact": old.pk,
                "new_fact": new.pk,
                "also_dismissed": dismissed,
                "facts_changed": {str(f.pk): str(f.status) for f in {f.pk: f for f in changed}.values()},
                "contradictions_opened": [c.pk for c in opened],
            },
        )
        Contradiction.objects.filter(pk__in=[contradiction.pk, *dismissed]).update(decision_event=decision)
        contradiction.decision_event = decision
    return contradiction


@dataclass(frozen=True)
class FactsErased:
    """What ``facts_erase`` removed: fact ids, entity ids (asked for, or left without a fact);
    ``undisputed``: ids of kept facts that disputed an erased one and are active now."""

    fact_ids: list[int]
    entity_ids: list[int]
    undisputed: tuple[int, ...] = ()


def facts_erase(*, fact_ids: Sequence[int], entity_ids: Sequence[int] = ()) -> FactsErased:
    """Delete for good the facts ``fact_ids`` (with their provenance, contradictions and outbox
    rows) and the entities ``entity_ids`` (whose facts must be among ``fact_ids``) of the current
    tenant, from PostgreSQL and from the Neo4j projection, in one transaction: Neo4j first, under
    the graph lock (shared, as drains take it; ``graph_rebuild`` waits) and the facts' locks, so
    neither a drain nor a rebuild can project them again; then the rows. Entities the facts touched
    that are left without any fact go too (their names are data of the facts). Kept facts that
    disputed an erased one are settled (``_disputes_settle``). A retried call skips what is gone.

    Raises ``Conflict`` when one of ``entity_ids`` still has a fact not in ``fact_ids`` and
    :class:`core.neo4j.Neo4jUnavailable` when Neo4j cannot be reached (nothing is deleted then).
    The caller records why."""
    from .projection import FACT_LOCK, TENANT_LOCK, unproject

    with transaction.atomic():
        advisory_xact_lock(TENANT_LOCK, shared=True)
        advisory_xact_locks(FACT_LOCK, sorted(set(fact_ids)))
        facts = list(Fact.objects.filter(pk__in=fact_ids).values_list("pk", "subject_id", "object_entity_id"))
        ids = [f[0] for f in facts]
        wanted = set(entity_ids)
        others = Fact.objects.filter(Q(subject_id__in=wanted) | Q(object_entity_id__in=wanted)).exclude(
            pk__in=ids
        )
        if wanted and others.exists():
            raise Conflict("An entity to erase still has facts outside the erasure.", field="entity_ids")
        touched = {e for _, s, o in facts for e in (s, o) if e is not None} | wanted
        still_used = set(
            Fact.objects.filter(subject_id__in=touched)
            .exclude(pk__in=ids)
            .values_list("subject_id", flat=True)
        ) | set(
            Fact.objects.filter(object_entity_id__in=touched)
            .exclude(pk__in=ids)
            .values_list("object_entity_id", flat=True)
        )
        doomed_entities = sorted((touched - still_used) | wanted)
        unproject(fact_ids=ids, entity_ids=doomed_entities, touched_ids=sorted(touched))
        challengers = list(
            Fact.objects.filter(
                pk__in=Contradiction.objects.filter(existing_fact_id__in=ids, status=ContradictionStatus.OPEN)
                .exclude(new_fact_id__in=ids)
                .values("new_fact_id")
            )
        )
        Contradiction.objects.filter(Q(existing_fact_id__in=ids) | Q(new_fact_id__in=ids)).delete()
        GraphOutbox.objects.filter(fact_id__in=ids).delete()
        FactProvenance.objects.filter(fact_id__in=ids).delete()
        Fact.objects.filter(pk__in=ids).delete()
        Entity.objects.filter(pk__in=doomed_entities).delete()
        made_active, _opened = _disputes_settle(challengers)
        if made_active:
            _queue_projection(made_active)
    return FactsErased(sorted(ids), doomed_entities, tuple(sorted(f.pk for f in made_active)))
