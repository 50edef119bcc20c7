"""The item store takes part in the data lifecycle (``compliance.lifecycle``, layer ``store``): an
erasure of a data subject deletes its items with their linked semantic rows (text, vector, lexical
postings) and redacts the trail's records of them; a legal hold keeps them from erasure and
retention; a retention rule removes items not written for longer than it keeps."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from django_tenants.utils import tenant_context

from compliance import lifecycle, services
from compliance.models import ErasureStatus, RetentionRule, RunStatus
from core.errors import Conflict
from memory.episodic.models import Event
from memory.semantic.models import LexicalPosting, SemanticMemory
from memory.store.models import StoreItem
from tests.factories import Caller, admin_client, requires_model

SUBJECT = "cust-4711"
ITEMS = "/api/v1/store/items"


def put(caller: Caller, namespace: list[str], key: str, value: Any, **extra: Any) -> dict[str, Any]:
    response = caller.post(ITEMS, {"namespace": namespace, "key": key, "value": value, **extra})
    assert response.status_code in (200, 201), response.content
    return response.json()


@requires_model
def test_erasure_of_a_subject_removes_its_items_and_their_vectors(alice: Caller, bob: Caller) -> None:
    mine = put(
        alice, ["crm", SUBJECT], "address", {"text": "Zoltan lives in Quokkaville"}, data_subject=SUBJECT
    )
    put(bob, ["crm", SUBJECT], "plain", {"n": 1}, index=False, data_subject=SUBJECT)
    other = put(alice, ["crm", "cust-1"], "address", {"text": "Maria lives in Porto"}, data_subject="cust-1")
    with tenant_context(alice.tenant):
        linked = StoreItem.objects.get(key="address", data_subject=SUBJECT).memory_id
        assert linked is not None and LexicalPosting.objects.filter(memory_id=linked).exists()
        request = services.erasure_request(
            kind="subject", value=SUBJECT, legal_basis="Art. 17", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="pavel")
        done = services.erasure_run(request_id=request.pk)
        assert done.status == ErasureStatus.DONE, done.error
        assert not StoreItem.objects.filter(data_subject=SUBJECT).exists()
        assert not SemanticMemory.objects.filter(pk=linked).exists()
        assert not LexicalPosting.objects.filter(memory_id=linked).exists()
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM memory_semanticmemory WHERE content LIKE %s", ["%Zoltan%"])
            assert cursor.fetchone()[0] == 0
        # the trail's record of the put is redacted with the subject's other events
        record = Event.objects.get(pk=mine["event_id"])
        assert record.redacted_at is not None and record.content == "" and SUBJECT not in record.payload_json
        receipt = json.loads(done.receipt)["stores"]["postgres"]
        assert receipt["store_items_deleted"] == 2 and receipt["store_memory_ids"] == [str(linked)]
        assert json.loads(done.receipt)["verification"]["postgres"]["store_left"] == 0
        # another subject's item is untouched
        kept = StoreItem.objects.get(key="address", data_subject="cust-1")
        assert kept.memory is not None and "Maria lives in Porto" in kept.memory.content
        assert Event.objects.get(pk=other["event_id"]).redacted_at is None


def test_a_hold_keeps_items_from_erasure_and_retention(alice: Caller) -> None:
    put(alice, ["crm", SUBJECT], "held", {"n": 1}, index=False, data_subject=SUBJECT)
    put(alice, ["crm", "cust-2"], "old", {"n": 2}, index=False, data_subject="cust-2")
    put(alice, ["crm", "cust-3"], "young", {"n": 3}, index=False)
    with tenant_context(alice.tenant):
        long_ago = timezone.now() - timedelta(days=100)
        StoreItem.objects.filter(key__in=["held", "old"]).update(updated_at=long_ago)
        now = timezone.now()
        assert lifecycle.retention_preview(now=now)["store"] is None  # no rule: kept until deleted
        services.retention_rule_save(rule=RetentionRule(layer="store", keep_days=30), username="olga")
        services.hold_place(kind="subject", value=SUBJECT, reason="case 9", username="olga")
        assert lifecycle.retention_preview(now=now)["store"] == 1
        with pytest.raises(Conflict):
            services.erasure_request(
                kind="subject", value=SUBJECT, legal_basis="Art. 17", note="", username="olga"
            )
        run = services.retention_run(
            run_id=services.retention_run_start(requested_by="job:retention").pk, now=now
        )
        assert run.status == RunStatus.DONE, run.error
        assert run.removed == {"store": 1}
        assert set(StoreItem.objects.values_list("key", flat=True)) == {"held", "young"}


def test_erasure_walks_every_stored_layer() -> None:
    """``ERASURE_STEPS`` names the layers in their order: a layer added to ``LAYERS`` without a step
    would be held and retained but never erased."""
    assert sorted(services.ERASURE_STEPS) == sorted(
        layer.name for layer in lifecycle.stored_layers() if layer.remove is not None
    )


def test_the_officer_reads_items_in_the_admin_and_changes_nothing(alice: Caller) -> None:
    put(alice, ["crm", SUBJECT], "note", {"text": "prefers email"}, index=False, data_subject=SUBJECT)
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    with tenant_context(alice.tenant):
        item = StoreItem.objects.get(key="note")
    listing = officer.get("/admin/memory/storeitem/")
    assert listing.status_code == 200 and "crm.cust-4711" in listing.content.decode()
    page = officer.get(f"/admin/memory/storeitem/{item.pk}/change/")
    assert page.status_code == 200 and "prefers email" in page.content.decode()
    assert officer.post(f"/admin/memory/storeitem/{item.pk}/delete/", {"post": "yes"}).status_code == 403
