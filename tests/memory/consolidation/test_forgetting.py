"""The forgetting curve: stability grows with each access, recall probability decays, memories that
fall below the tenant's threshold are archived (never deleted, never a forgotten one), found with
``include_archived`` and restored by an access or an operator. A controlled clock throughout."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from django_tenants.utils import tenant_context

from memory.consolidation.models import ConsolidationRun, RunStatus
from memory.consolidation.services.forgetting import forgetting_pass
from memory.episodic.models import Event
from memory.semantic.forgetting import recall_probability, stability_after_recall
from memory.semantic.models import MemoryAccess, SemanticMemory
from tests.factories import Caller, admin_client, contents, remember, requires_model, search

pytestmark = [pytest.mark.django_db, requires_model]

# the jobs' clock; recalls happen at the real time, so it is the time the tests run
CLOCK = datetime.now(UTC).replace(microsecond=0)


def age(memory_id: str, *, created_days: float, accessed_days: float, stability_hours: float = 168.0) -> None:
    """Back-date a memory (test set-up: what months of not being used leave behind)."""
    SemanticMemory.objects.filter(pk=memory_id).update(created_at=CLOCK - timedelta(days=created_days))
    MemoryAccess.objects.filter(pk=memory_id).update(
        last_accessed_at=CLOCK - timedelta(days=accessed_days), stability_hours=stability_hours
    )


def test_the_curve_and_the_spacing_rule() -> None:
    assert recall_probability(0, 168) == 1.0
    assert recall_probability(168, 168) == pytest.approx(math.exp(-1))
    assert recall_probability(-5, 10) == 1.0  # a clock skew is no access in the future
    # a recall right after the last raises S by the floor (10% of g), a late one by almost g
    assert stability_after_recall(100, 0, 2.0) == pytest.approx(120)
    assert stability_after_recall(100, 1000, 2.0) == pytest.approx(100 * (1 + 2 * (1 - math.exp(-10))))


def test_stale_memories_are_archived_young_and_used_ones_stay(alice: Caller, bob: Caller) -> None:
    stale = remember(alice, "The old VPN gateway lives at 10.0.0.7.", scope="shared").json()["id"]
    used = remember(alice, "Deploys happen on Tuesdays after the standup.", scope="shared").json()["id"]
    young = remember(alice, "The canteen serves paella on Fridays.", scope="shared").json()["id"]
    strong = remember(alice, "The payroll system is called Ledgerly.", scope="shared").json()["id"]
    forgotten = remember(alice, "A memory the agent forgot long ago.", scope="shared").json()["id"]
    with tenant_context(alice.tenant):
        age(stale, created_days=60, accessed_days=40)  # t = 960 h, S = 168 h: p = 0.003
        age(used, created_days=60, accessed_days=2)  # p = 0.75
        age(young, created_days=10, accessed_days=10)  # p = 0.24 would not save it; its age does
        age(strong, created_days=60, accessed_days=40, stability_hours=2000)  # p = 0.62
        age(forgotten, created_days=60, accessed_days=40)
    assert alice.client.delete(f"/api/v1/memories/{forgotten}").status_code == 200

    with tenant_context(alice.tenant):
        run = forgetting_pass(now=CLOCK)
        assert run is not None and run.status == RunStatus.DONE
        assert run.counts == {"examined": 5, "archived": 1}
        archived = set(SemanticMemory.objects.filter(archived_at__isnull=False).values_list("pk", flat=True))
        assert {str(i) for i in archived} == {stale}
        assert SemanticMemory.objects.get(pk=forgotten).archived_at is None  # never touches forgotten rows
        decision = Event.objects.filter(payload_index__action="memories_archive").get()
        assert decision.actor == "job:consolidation"
        assert decision.payload["memory_ids"] == [stale] and decision.payload["run_id"] == run.pk

        # run twice: the same result, nothing more recorded
        again = forgetting_pass(now=CLOCK)
        assert again is not None and again.counts == {"examined": 5, "archived": 0}
        assert SemanticMemory.objects.filter(archived_at__isnull=False).count() == 1
        assert Event.objects.filter(payload_index__action="memories_archive").count() == 1
        assert SemanticMemory.objects.count() == 5  # archiving never deletes

    # hidden from default recall and listing, found with include_archived (bob sees shared ones)
    assert "The old VPN gateway lives at 10.0.0.7." not in contents(search(bob, "VPN gateway address"))
    listed = bob.get("/api/v1/memories").json()["results"]
    assert stale not in [m["id"] for m in listed]
    listed = bob.get("/api/v1/memories", {"include_archived": "true"}).json()["results"]
    assert stale in [m["id"] for m in listed]
    body = bob.get(f"/api/v1/memories/{stale}").json()
    assert (
        body["archived_at"] == CLOCK.isoformat().replace("+00:00", "Z") and body["stability_hours"] == 168.0
    )
    assert body["recall_probability"] < 0.01


def test_an_access_restores_and_strengthens_an_archived_memory(alice: Caller) -> None:
    stale = remember(alice, "The old VPN gateway lives at 10.0.0.7.").json()["id"]
    with tenant_context(alice.tenant):
        age(stale, created_days=60, accessed_days=40)
        forgetting_pass(now=CLOCK)
        assert SemanticMemory.objects.get(pk=stale).archived_at is not None
    hits = search(alice, "VPN gateway address", filters={"include_archived": True})
    assert hits[0]["memory"]["id"] == stale
    assert hits[0]["memory"]["archived_at"] is None
    # a recall after 40 days (p = 0.003) raises S by almost g = 2: 168 h → ~503 h
    assert hits[0]["memory"]["stability_hours"] == pytest.approx(
        168 * (1 + 2 * (1 - math.exp(-960 / 168))), rel=1e-3
    )
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.get(pk=stale).archived_at is None
        restore = Event.objects.filter(payload_index__action="memories_restore").get()
        assert restore.payload["memory_ids"] == [stale] and restore.payload["reason"] == "access"
    assert stale in contents_ids(search(alice, "VPN gateway address"))


def contents_ids(hits: list[dict]) -> list[str]:
    return [h["memory"]["id"] for h in hits]


def test_a_reinforcement_restores_an_archived_memory_instead_of_a_duplicate(alice: Caller) -> None:
    stale = remember(alice, "The old VPN gateway lives at 10.0.0.7.").json()["id"]
    with tenant_context(alice.tenant):
        age(stale, created_days=60, accessed_days=40)
        forgetting_pass(now=CLOCK)
    again = remember(alice, "The old VPN gateway lives at 10.0.0.7.")
    assert again.status_code == 200 and again.json()["id"] == stale
    assert again.json()["archived_at"] is None


def test_an_operator_restores_with_the_change_permission(alice: Caller) -> None:
    stale = remember(alice, "The old VPN gateway lives at 10.0.0.7.").json()["id"]
    with tenant_context(alice.tenant):
        age(stale, created_days=60, accessed_days=40)
        forgetting_pass(now=CLOCK)
    action = {"action": "restore", "_selected_action": [stale]}
    viewer = admin_client(alice.tenant, "auditor", group="compliance officer")
    viewer.post("/admin/memory/semanticmemory/", action)
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.get(pk=stale).archived_at is not None
    operator = admin_client(alice.tenant, "root", superuser=True)
    response = operator.post("/admin/memory/semanticmemory/", action)
    assert response.status_code == 302
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.get(pk=stale).archived_at is None
        restore = Event.objects.filter(payload_index__action="memories_restore").get()
        assert restore.actor == "user:root" and restore.payload["reason"] == "operator"


def test_runs_are_shown_in_the_admin(alice: Caller) -> None:
    remember(alice, "The old VPN gateway lives at 10.0.0.7.")
    with tenant_context(alice.tenant):
        forgetting_pass(now=CLOCK)
        run = ConsolidationRun.objects.get()
    page = admin_client(alice.tenant, "auditor", group="compliance officer").get(
        "/admin/memory/consolidationrun/"
    )
    assert page.status_code == 200
    assert b"forgetting curve (archive)" in page.content and b"archived 0, examined 1" in page.content
    detail = admin_client(alice.tenant, "root", superuser=True).get(
        f"/admin/memory/consolidationrun/{run.pk}/change/"
    )
    assert detail.status_code == 200


def test_another_tenant_archives_nothing_of_this_one(alice: Caller, mallory: Caller) -> None:
    stale = remember(alice, "The old VPN gateway lives at 10.0.0.7.").json()["id"]
    with tenant_context(alice.tenant):
        age(stale, created_days=60, accessed_days=40)
    with tenant_context(mallory.tenant):
        run = forgetting_pass(now=CLOCK)
        assert run is not None and run.counts.get("archived", 0) == 0
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.get(pk=stale).archived_at is None
    assert mallory.get(f"/api/v1/memories/{stale}").status_code == 404
