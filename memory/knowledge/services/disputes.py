"""Disputes between facts: a fact withdrawn by an agent (``fact_retract``), a contradiction decided
by a person (``contradiction_resolve``), and the disputed facts settled after either."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agents.models import Agent
from agents.services import system_agent_get
from agents.subjects import subject_visible_q
from core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from core.locks import advisory_xact_lock
from memory.episodic.models import Event
from memory.episodic.services import agent_session, decision_record, person_session

from ..models import (
    LIVE_STATUSES,
    Cardinality,
    Contradiction,
    ContradictionStatus,
    Fact,
    FactStatus,
    Predicate,
    Resolution,
)
from .outbox import queue_projection


def disputes_settle(facts: Sequence[Fact]) -> tuple[list[Fact], list[Contradiction]]:
    """Bring ``facts`` back in line with the rule that a fact is ``disputed`` exactly while an open
    contradiction names it as the new fact, after contradictions on them closed. Each disputed fact
    no open contradiction names any more (oldest first) is judged as ``fact_assert`` would judge
    it now: disputed again, by a new open contradiction, when its subject holds another object as
    active for the same end user (``data_subject``) on a ``one`` predicate (and that pair was not decided already); otherwise active.
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
                    subject_id=fact.subject_id,
                    predicate_id=fact.predicate_id,
                    data_subject=fact.data_subject,  # one end user's facts, as rule.assert_judge
                    status=FactStatus.ACTIVE,
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
    facts that disputed it settled by ``disputes_settle``: active, or disputing the fact their
    subject now holds), a ``decision`` event logged in the fact's session (for a fact asserted
    without one: the request's ``session_id``, else the agent's ``agent:<name>`` session), naming
    the facts whose status changed and linked from the contradictions it closed
    (``decision_event``). Only the fact's author (the agent that first asserted it) may, or a key
    with the ``curate`` scope (``may_curate``). Raises ``NotFound`` for an unknown or malformed id
    (or a fact of another end user than the one ``agent`` acts for: ``agents.subjects``),
    ``PermissionDenied`` for another agent's fact, ``Conflict`` if not live."""
    if isinstance(fact_id, str):
        if not fact_id.isdigit() or len(fact_id) > 18:
            raise NotFound(f"No fact {fact_id}.", field="id")
        fact_id = int(fact_id)
    with transaction.atomic():
        fact = Fact.objects.select_for_update().filter(subject_visible_q(agent), pk=fact_id).first()
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
        made_active, opened = disputes_settle(challengers)
        queue_projection([fact, *made_active])
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


def _accept_new(
    contradiction: Contradiction, *, reviewer: str, now: datetime
) -> tuple[list[Fact], list[int]]:
    """``accept_new``: the existing fact superseded (``valid_to`` = the new fact's ``valid_from``),
    the new one active, the other open contradictions against the superseded fact moved onto the
    new one. Returns ``(facts changed, contradictions dismissed)``; the caller saves the facts."""
    old, new = contradiction.existing_fact, contradiction.new_fact
    old.status, old.valid_to = FactStatus.SUPERSEDED, max(new.valid_from, old.valid_from)
    new.status = FactStatus.ACTIVE
    dismissed: list[int] = []
    for other in Contradiction.objects.filter(existing_fact=old, status=ContradictionStatus.OPEN).exclude(
        pk=contradiction.pk
    ):
        other.status, other.resolved_at, other.reviewer = ContradictionStatus.DISMISSED, now, reviewer
        other.note = f"moved onto fact #{new.pk} when #{contradiction.pk} accepted it"
        other.save(update_fields=["status", "resolved_at", "reviewer", "note"])
        Contradiction.objects.get_or_create(existing_fact=new, new_fact=other.new_fact)
        dismissed.append(other.pk)
    return [old, new], dismissed


def _both_valid(
    contradiction: Contradiction, *, reviewer: str, now: datetime
) -> tuple[list[Fact], list[int]]:
    """``both_valid``: the predicate made ``many``, the new fact active, every other open
    contradiction on the predicate dismissed and its disputed fact made active. Returns
    ``(facts changed, contradictions dismissed)``; the caller saves the new fact."""
    new, predicate = contradiction.new_fact, contradiction.existing_fact.predicate
    predicate.cardinality = Cardinality.MANY
    predicate.save(update_fields=["cardinality"])
    new.status = FactStatus.ACTIVE
    changed, dismissed = [new], []
    others = Contradiction.objects.filter(new_fact__predicate=predicate, status=ContradictionStatus.OPEN)
    for other in others.exclude(pk=contradiction.pk).select_related("new_fact"):
        other.status, other.resolved_at, other.reviewer = ContradictionStatus.DISMISSED, now, reviewer
        other.note = f"predicate {predicate.name} made 'many' by #{contradiction.pk}"
        other.save(update_fields=["status", "resolved_at", "reviewer", "note"])
        if other.new_fact.status == FactStatus.DISPUTED:
            other.new_fact.status = FactStatus.ACTIVE
            other.new_fact.save(update_fields=["status"])
            changed.append(other.new_fact)
        dismissed.append(other.pk)
    return changed, dismissed


def _resolution_apply(
    contradiction: Contradiction, *, resolution: str, reviewer: str, now: datetime
) -> tuple[list[Fact], list[int]]:
    """Change the facts as ``resolution`` says (``dismiss``: none); returns ``(facts changed,
    contradictions dismissed)``."""
    if resolution == Resolution.ACCEPT_NEW:
        return _accept_new(contradiction, reviewer=reviewer, now=now)
    if resolution == Resolution.KEEP_EXISTING:
        contradiction.new_fact.status = FactStatus.RETRACTED
        return [contradiction.new_fact], []
    if resolution == Resolution.BOTH_VALID:
        return _both_valid(contradiction, reviewer=reviewer, now=now)
    return [], []


def _resolution_record(
    contradiction: Contradiction,
    *,
    reviewer: str,
    note: str,
    dismissed: list[int],
    changed: list[Fact],
    opened: list[Contradiction],
) -> Event:
    """The ``decision`` event of a resolution, in the session the disputed fact came from (a
    person's own session when neither fact has one), as the tenant's system agent for ``reviewer``."""
    old, new, resolution = contradiction.existing_fact, contradiction.new_fact, contradiction.resolution
    return decision_record(
        agent=system_agent_get(),
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
        changed, dismissed = _resolution_apply(
            contradiction, resolution=resolution, reviewer=reviewer, now=now
        )
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
        made_active, opened = disputes_settle([contradiction.new_fact, *(c.new_fact for c in also)])
        changed += made_active
        if changed:
            queue_projection(changed)
        decision = _resolution_record(
            contradiction, reviewer=reviewer, note=note, dismissed=dismissed, changed=changed, opened=opened
        )
        Contradiction.objects.filter(pk__in=[contradiction.pk, *dismissed]).update(decision_event=decision)
        contradiction.decision_event = decision
    return contradiction
