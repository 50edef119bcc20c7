"""Asserting facts, one (``fact_assert``) or a batch in one transaction (``facts_assert_batch``):
both check an item the same way (``_prepare``), judge it by the one rule (``rule.assert_judge``)
and build its rows the same way (``_assert_decide``); they differ in how they read and write."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.models import Agent
from agents.subjects import subject_written
from core.bulk import rows_insert
from core.errors import Conflict, DomainError, InvalidInput, NotFound
from core.locks import advisory_xact_lock, advisory_xact_locks
from memory.episodic.models import EventKind, EventRole
from memory.episodic.services import EventData, agent_session, events_append

from .. import selectors
from ..models import Contradiction, Entity, Fact, FactProvenance, FactStatus, Predicate
from .data import AssertResult, FactData, FactObject, literal_canonical
from .names import (
    entities_ensure,
    entity_name_checked,
    predicate_name_checked,
    predicates_ensure,
)
from .outbox import queue_projection
from .rule import assert_judge


@dataclass
class _Prepared:
    """One assertion once its names and literal are checked (before any query)."""

    data: FactData
    valid_from: datetime
    subject_key: str
    object_entity_key: str | None
    literal_value: Any
    object_key: str  # for an entity object: filled in once its id is known


def _prepare(data: FactData) -> _Prepared:
    """The checks of an assertion that need no query, in order. Raises ``InvalidInput``."""
    if isinstance(data.confidence, bool) or not (0.0 <= data.confidence <= 1.0):
        raise InvalidInput("confidence must be between 0 and 1.", field="confidence")
    valid_from = data.valid_from or timezone.now()
    if timezone.is_naive(valid_from):
        raise InvalidInput("valid_from must include a timezone.", field="valid_from")
    subject_key, _ = entity_name_checked(data.subject, data.subject_type, field="subject")
    predicate_name_checked(data.predicate)
    obj = data.object
    if obj.entity is not None:
        if obj.literal_type:
            raise InvalidInput("Give either an entity or a literal as the object.", field="object")
        object_entity_key, _ = entity_name_checked(obj.entity, obj.entity_type, field="object")
        return _Prepared(data, valid_from, subject_key, object_entity_key, None, "")
    literal_value, object_key = literal_canonical(obj.literal_type, obj.value)
    return _Prepared(data, valid_from, subject_key, None, literal_value, object_key)


def _object_key_checked(obj: FactObject, entity: Entity) -> str:
    """The object key of an entity object; raises ``Conflict`` (409, field ``object.id``) when the
    object gave an id that is not the stored entity's (a well-formed request that disagrees with the
    stored state)."""
    if obj.entity_id is not None and obj.entity_id != entity.pk:
        raise Conflict(f"Entity {obj.entity!r} has id {entity.pk}, not {obj.entity_id}.", field="object.id")
    return f"e:{entity.pk}"


def _source_event_checked(data: FactData, known_events: set[int]) -> None:
    """Raises ``NotFound`` (404, field ``source_event_id``) for a source event not in ``known_events``."""
    if data.source_event_id is not None and data.source_event_id not in known_events:
        raise NotFound(f"No event {data.source_event_id} in this tenant.", field="source_event_id")


@dataclass(frozen=True)
class _Asserted:
    """One assertion judged, its rows built and nothing written: the result, its provenance row,
    and whether the stored fact it reinforces got a higher confidence."""

    result: AssertResult
    provenance: FactProvenance
    raised: bool = False


def _assert_decide(
    agent: Agent,
    item: _Prepared,
    subject: Entity,
    predicate: Predicate,
    object_entity: Entity | None,
    known: Sequence[Fact],
    refuse_retracted: bool,
) -> _Asserted:
    """Judge ``item`` against ``known`` (``assert_judge``) and build what it changes: the same fact
    with confidence = max (reinforced), or a new fact, ``disputed`` with a ``Contradiction`` against
    the fact it contradicts, else active. Raises ``FactRetracted``."""
    data = item.data
    judged = assert_judge(
        known=known,
        object_key=item.object_key,
        cardinality=predicate.cardinality,
        data_subject=data.data_subject,
        refuse_retracted=refuse_retracted,
    )
    row = FactProvenance(
        agent=agent,
        session_id=data.session_id,
        source_event_id=data.source_event_id,
        confidence=data.confidence,
    )
    if judged.outcome == "reinforced":
        same = judged.fact
        assert same is not None
        raised = data.confidence > same.confidence
        if raised:
            same.confidence = data.confidence
        row.fact = same
        return _Asserted(AssertResult(same, "reinforced"), row, raised)
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
        status=FactStatus.DISPUTED if judged.fact is not None else FactStatus.ACTIVE,
    )
    contradiction = None if judged.fact is None else Contradiction(existing_fact=judged.fact, new_fact=fact)
    row.fact = fact
    return _Asserted(AssertResult(fact, judged.outcome, contradiction), row)


def fact_assert(*, agent: Agent, data: FactData, refuse_retracted: bool = False) -> AssertResult:
    """Record that ``agent`` holds ``data`` true.

    - The same live fact (subject, predicate, object, data subject) again: reinforced (confidence =
      max, one more provenance row).
    - A ``one`` predicate whose subject has an active fact of the same data subject with another
      object: the new fact is ``disputed`` and one open ``Contradiction`` links the two; the existing fact stays active.
    - Otherwise a new active fact.

    Asserts on the same (subject, predicate) are serialised, so two agents asserting conflicting
    facts at the same moment yield exactly one contradiction. Raises ``InvalidInput`` for bad names,
    predicates, literals, confidence, a naive ``valid_from`` or an unknown source event, and, with
    ``refuse_retracted`` (background jobs), ``FactRetracted`` when the same fact was retracted.
    ``data.data_subject`` is ``agents.subjects.subject_written``'s (``SubjectRefused``, 403, for
    another subject than the one ``agent`` acts for).
    """
    data = replace(data, data_subject=subject_written(agent, data.data_subject))
    item = _prepare(data)
    with transaction.atomic():
        entities, predicates = _names_ensure([item], None)
        subject, predicate = entities[item.subject_key], predicates[data.predicate]
        object_entity = None if item.object_entity_key is None else entities[item.object_entity_key]
        # asserts on one (subject, predicate) are what may conflict: serialised (as the batch locks)
        advisory_xact_lock("fact", subject.pk, predicate.pk)
        known = selectors.facts_judged_against(
            subject_id=subject.pk,
            predicate_id=predicate.pk,
            object_key=item.object_key,
            cardinality=predicate.cardinality,
            retracted=refuse_retracted,
        )
        asserted = _assert_decide(agent, item, subject, predicate, object_entity, known, refuse_retracted)
        result = asserted.result
        if asserted.raised:
            result.fact.save(update_fields=["confidence"])
        elif result.outcome != "reinforced":
            result.fact.save()
        asserted.provenance.save()
        if result.contradiction is not None:
            result.contradiction.save()
        queue_projection([result.fact])
    return result


def facts_assert(*, agent: Agent, facts: Sequence[FactData], batch: bool) -> list[AssertResult]:
    """What ``POST /api/v1/facts`` runs: one fact (``batch`` False: ``fact_assert``, errors name
    its fields) or an array, even of one (``batch``: ``facts_assert_batch``, errors name
    ``facts[<index>].<field>``). Raises what those raise."""
    if not batch and len(facts) == 1:
        return [fact_assert(agent=agent, data=facts[0])]  # its own transaction, not a savepoint
    if not batch:
        with transaction.atomic():
            return [fact_assert(agent=agent, data=data) for data in facts]
    return facts_assert_batch(agent=agent, facts=facts)


def _at(field_prefix: str | None, index: int, exc: DomainError) -> DomainError:
    """``exc`` with its field named as item ``index`` of the batch's ``field_prefix`` (None: a single
    fact, whose fields keep their own names)."""
    if field_prefix is None:
        return exc
    exc.field = f"{field_prefix}[{index}].{exc.field}" if exc.field else f"{field_prefix}[{index}]"
    return exc


def _prepare_batch(facts: Sequence[FactData], field_prefix: str) -> list[_Prepared]:
    """``_prepare`` for every item; raises the first item's error, its field named by ``_at``."""
    prepared: list[_Prepared] = []
    for index, data in enumerate(facts):
        try:
            prepared.append(_prepare(data))
        except DomainError as exc:
            raise _at(field_prefix, index, exc) from None
    return prepared


def _names_ensure(
    prepared: list[_Prepared], field_prefix: str | None
) -> tuple[dict[str, Entity], dict[str, Predicate]]:
    """The items' entities (by key) and predicates (by name), made as ``entity_ensure`` and
    ``predicate_ensure`` make them, in one statement each when they exist; each entity object's key
    filled in. Raises the first item's ``InvalidInput`` (an ``object.id`` not the entity's, an
    unknown source event), named by ``_at``."""
    mentions: list[tuple[str, str, str]] = []
    for item in prepared:
        mentions.append((item.subject_key, item.data.subject.strip(), item.data.subject_type))
        if item.object_entity_key is not None:
            obj = item.data.object
            mentions.append((item.object_entity_key, str(obj.entity).strip(), obj.entity_type))
    entities = entities_ensure(mentions)
    predicates = predicates_ensure([item.data.predicate for item in prepared])
    known_events = selectors.events_known(item.data.source_event_id for item in prepared)
    for index, item in enumerate(prepared):
        try:
            if item.object_entity_key is not None:
                item.object_key = _object_key_checked(item.data.object, entities[item.object_entity_key])
            _source_event_checked(item.data, known_events)
        except DomainError as exc:
            raise _at(field_prefix, index, exc) from None
    return entities, predicates


def _batch_write(decided: list[_Asserted]) -> None:
    """Write a batch's decided rows: the new facts, the stored facts whose confidence went up, the
    provenance rows and the contradictions opened, one statement each."""
    new_facts = [a.result.fact for a in decided if a.result.outcome != "reinforced"]
    # facts of earlier items carry their raised confidence into their insert
    raised = {a.result.fact.pk: a.result.fact for a in decided if a.raised and a.result.fact.pk is not None}
    rows_insert(new_facts)  # ids come back (RETURNING)
    if raised:
        Fact.objects.bulk_update(list(raised.values()), ["confidence"])
    rows_insert([a.provenance for a in decided])
    rows_insert([a.result.contradiction for a in decided if a.result.contradiction is not None])


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

    - The same live fact (subject, predicate, object, data subject) as a stored one or an earlier
      item: ``reinforced`` (confidence = max, one more provenance row).
    - A ``one`` predicate whose subject has an active fact of the same data subject with another
      object, stored or from an earlier item: ``disputed``, with one open ``Contradiction`` against the oldest such fact
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
    ``<field_prefix>[<index>].<field>`` of the first failing item. Each item's ``data_subject`` is
    ``agents.subjects.subject_written``'s (``SubjectRefused``, 403, naming the item's field).
    """
    if not facts:
        raise InvalidInput("At least one fact is required.", field=field_prefix)
    facts = [
        replace(
            data,
            data_subject=subject_written(agent, data.data_subject, field=f"{field_prefix}[{i}].data_subject"),
        )
        for i, data in enumerate(facts)
    ]
    prepared = _prepare_batch(facts, field_prefix)
    with transaction.atomic():
        entities, predicates = _names_ensure(prepared, field_prefix)
        pairs = sorted({(entities[i.subject_key].pk, predicates[i.data.predicate].pk) for i in prepared})
        advisory_xact_locks("fact", (f"{s}:{p}" for s, p in pairs))  # the names fact_assert locks
        known = selectors.facts_of_pairs(pairs)
        decided: list[_Asserted] = []
        for index, item in enumerate(prepared):
            subject, predicate = entities[item.subject_key], predicates[item.data.predicate]
            here = known[(subject.pk, predicate.pk)]
            object_entity = None if item.object_entity_key is None else entities[item.object_entity_key]
            try:
                asserted = _assert_decide(
                    agent, item, subject, predicate, object_entity, here, refuse_retracted
                )
            except DomainError as exc:
                raise _at(field_prefix, index, exc) from None
            if asserted.result.outcome != "reinforced":
                here.append(asserted.result.fact)  # later items see it
            decided.append(asserted)
        _batch_write(decided)
        results = [a.result for a in decided]
        queue_projection(list({r.fact.pk: r.fact for r in results}.values()))
        _record_batch(
            agent=agent,
            results=results,
            groups=[(item.data.session_id, item.data.data_subject) for item in prepared],
        )
    return results


def _record_batch(*, agent: Agent, results: list[AssertResult], groups: list[tuple[str, str]]) -> None:
    """One ``decision`` per (session, data subject) of a batch's items (what the batch did there),
    all appended by one ``events_append`` (one lock and one move of the chain head for the batch).
    The decision about a data subject's facts carries that subject, so erasing the subject redacts
    it with them."""
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
