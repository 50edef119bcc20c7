"""A fact is ``disputed`` exactly while an open contradiction names it as the new fact (issue 28,
item 11): every way a contradiction closes brings the facts it disputed back in line, and the
contradiction points to the decision that closed it.

The ways walked: each resolution (the list follows ``Resolution``, so a new one is walked too), an
agent's retraction of either fact, and the erasure of the existing fact. After each, no fact is
disputed without an open contradiction, and every open contradiction's new fact is disputed.
"""

from __future__ import annotations

import pytest
from django.db.models import Q
from django_tenants.utils import tenant_context

from memory.episodic.models import Event, EventKind
from memory.knowledge import services
from memory.knowledge.models import (
    Contradiction,
    ContradictionStatus,
    Fact,
    FactStatus,
    Resolution,
)
from memory.knowledge.services import FactData, FactObject
from tests.factories import Caller, admin_client, conflict_make


def out_of_line() -> list[str]:
    """What breaks the rule, in words: disputed facts no open contradiction names, and open
    contradictions whose new fact is not disputed (call inside the tenant)."""
    open_ones = Contradiction.objects.filter(status=ContradictionStatus.OPEN)
    orphans = Fact.objects.filter(status=FactStatus.DISPUTED).exclude(pk__in=open_ones.values("new_fact"))
    stale = open_ones.exclude(new_fact__status=FactStatus.DISPUTED)
    return [f"fact #{f.pk} disputed by nothing" for f in orphans] + [
        f"contradiction #{c.pk} open on a {c.new_fact.status} fact" for c in stale.select_related("new_fact")
    ]


def assert_fact(caller: Caller, obj: str, *, subject: str = "Alice", session_id: str = "s-x") -> Fact:
    return services.fact_assert(
        agent=caller.agent,
        data=FactData(
            subject=subject, predicate="works_at", object=FactObject(entity=obj), session_id=session_id
        ),
    ).fact


# what each resolution leaves: (existing fact, new fact) statuses
AFTER = {
    Resolution.ACCEPT_NEW: (FactStatus.SUPERSEDED, FactStatus.ACTIVE),
    Resolution.KEEP_EXISTING: (FactStatus.ACTIVE, FactStatus.RETRACTED),
    Resolution.BOTH_VALID: (FactStatus.ACTIVE, FactStatus.ACTIVE),
    Resolution.DISMISS: (FactStatus.ACTIVE, FactStatus.ACTIVE),
}


@pytest.mark.parametrize("resolution", list(Resolution))
def test_every_resolution_leaves_no_fact_disputed_by_nothing(
    alice: Caller, bob: Caller, resolution: Resolution
) -> None:
    assert resolution in AFTER, f"say what {resolution} leaves"
    with tenant_context(alice.tenant):
        dispute = conflict_make(alice.agent, bob.agent)
        third = assert_fact(bob, "Initech")  # a second challenger of the existing fact
        assert out_of_line() == []
        services.contradiction_resolve(
            contradiction_id=dispute.contradiction.pk, resolution=resolution, reviewer="olivia"
        )
        dispute.existing.refresh_from_db()
        dispute.new.refresh_from_db()
        assert (dispute.existing.status, dispute.new.status) == AFTER[resolution]
        assert out_of_line() == [], resolution
        # the contradiction points to the decision that closed it, in the trail
        closed = Contradiction.objects.get(pk=dispute.contradiction.pk)
        decision = closed.decision_event
        assert decision is not None and decision.kind == EventKind.DECISION
        assert decision.payload["contradiction_id"] == closed.pk and decision.actor == "user:olivia"
        third.refresh_from_db()
        assert third.status in (FactStatus.DISPUTED, FactStatus.ACTIVE)


def test_a_dismissal_makes_the_disputed_fact_active_and_says_so(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        dispute = conflict_make(alice.agent, bob.agent)
        services.contradiction_resolve(
            contradiction_id=dispute.contradiction.pk,
            resolution=Resolution.DISMISS,
            reviewer="olivia",
            note="the same employer under its new name",
        )
        dispute.new.refresh_from_db()
        assert dispute.new.status == FactStatus.ACTIVE
        decision = Contradiction.objects.get(pk=dispute.contradiction.pk).decision_event
        assert decision is not None
        assert decision.payload["facts_changed"] == {str(dispute.new.pk): FactStatus.ACTIVE}
        assert decision.session_id == "s-review"  # the disputed fact's session
    # the fact's page shows the dismissal and links the decision
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    page = officer.get(f"/admin/memory/fact/{dispute.new.pk}/change/").content.decode()
    assert "dismissed" in page and f"/admin/memory/event/{decision.pk}/change/" in page


def test_retracting_the_existing_fact_settles_its_challengers(alice: Caller, bob: Caller) -> None:
    """Two facts disputed the retracted one: the older stands, the other now disputes it."""
    with tenant_context(alice.tenant):
        dispute = conflict_make(alice.agent, bob.agent)
        third = assert_fact(bob, "Initech")
        services.fact_retract(agent=alice.agent, fact_id=dispute.existing.pk, reason="left the company")
        dispute.new.refresh_from_db()
        third.refresh_from_db()
        assert (dispute.new.status, third.status) == (FactStatus.ACTIVE, FactStatus.DISPUTED)
        assert out_of_line() == []
        reopened = Contradiction.objects.get(status=ContradictionStatus.OPEN)
        assert (reopened.existing_fact_id, reopened.new_fact_id) == (dispute.new.pk, third.pk)
        # the retraction's decision is linked from the contradictions it dismissed, and names the changes
        dismissed = Contradiction.objects.filter(existing_fact=dispute.existing)
        assert {c.status for c in dismissed} == {ContradictionStatus.DISMISSED}
        decision = Event.objects.get(
            payload_index__action="fact_retract", payload_index__fact_id=dispute.existing.pk
        )
        assert {c.decision_event_id for c in dismissed} == {decision.pk}
        assert decision.payload["facts_changed"] == {str(dispute.new.pk): FactStatus.ACTIVE}
        assert decision.payload["contradictions_opened"] == [reopened.pk]


def test_retracting_the_disputed_fact_closes_its_contradiction(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        dispute = conflict_make(alice.agent, bob.agent)
        services.fact_retract(agent=bob.agent, fact_id=dispute.new.pk, reason="misread the badge")
        dispute.existing.refresh_from_db()
        assert dispute.existing.status == FactStatus.ACTIVE
        assert out_of_line() == []
        closed = Contradiction.objects.get(pk=dispute.contradiction.pk)
        assert closed.status == ContradictionStatus.DISMISSED and closed.decision_event is not None


def test_erasing_the_existing_fact_settles_its_challenger(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        dispute = conflict_make(alice.agent, bob.agent)
        erased = services.facts_erase(fact_ids=[dispute.existing.pk])
        assert erased.fact_ids == [dispute.existing.pk]
        dispute.new.refresh_from_db()
        assert dispute.new.status == FactStatus.ACTIVE
        assert out_of_line() == []
        assert not Contradiction.objects.filter(
            Q(existing_fact=dispute.existing) | Q(new_fact=dispute.existing)
        )
