"""Superseded memories stay history: a write never reinforces one (exact or near duplicate), the
async worker's drain finds updates like a synchronous write (its outcome shows when the pending
memory is read), and erasure by subject removes every version of the chain."""

from __future__ import annotations

from django_tenants.utils import tenant_context

from compliance import services
from compliance.models import ErasureStatus
from memory.semantic.models import SemanticMemory
from memory.semantic.services.pending import pending_embed
from tenants.models import Tenant
from tests.compliance.conftest import finished
from tests.factories import Caller, make_caller, remember, requires_model

pytestmark = requires_model

NINE = "Dana's return flight departs at 09:05 on Sunday."
ELEVEN = "Dana's return flight departs at 11:05 on Sunday."
NINE_REWORDED = "Dana's return flight leaves at 09:05 on Sunday."


def written(caller: Caller, content: str, **extra: object) -> dict:
    response = remember(caller, content, **extra)
    assert response.status_code in (200, 201, 202), response.content
    return response.json()


def test_an_older_value_written_again_is_current_again(alice: Caller) -> None:
    nine = written(alice, NINE)
    eleven = written(alice, ELEVEN)
    assert eleven["outcome"] == "updated" and eleven["supersedes"] == nine["id"]
    again = written(alice, NINE)  # the exact text of the superseded memory: not reinforced
    assert again["outcome"] == "updated" and again["supersedes"] == eleven["id"]
    assert again["id"] not in (nine["id"], eleven["id"])
    versions = alice.get(f"/api/v1/memories/{nine['id']}/versions").json()
    assert [m["id"] for m in versions["results"]] == [nine["id"], eleven["id"], again["id"]]
    assert versions["current"] == again["id"]
    assert alice.get(f"/api/v1/memories/{nine['id']}").json()["access_count"] == 0


def test_a_rewording_of_a_superseded_memory_does_not_reinforce_it(alice: Caller) -> None:
    nine = written(alice, NINE)
    eleven = written(alice, ELEVEN)
    reworded = written(alice, NINE_REWORDED)
    assert reworded["deduplicated"] is False and reworded["id"] != nine["id"]
    assert reworded["outcome"] == "updated" and reworded["supersedes"] == eleven["id"]
    old = alice.get(f"/api/v1/memories/{nine['id']}").json()
    assert old["access_count"] == 0 and old["superseded_by"] == eleven["id"]


def test_the_async_drain_decides_updates_and_says_so_on_read(scratch_tenant: Tenant) -> None:
    caller = make_caller(scratch_tenant, "async-writer")
    nine = written(caller, NINE)
    accepted = written(caller, ELEVEN, write="async")
    assert accepted["outcome"] == "accepted" and accepted["supersedes"] is None
    with tenant_context(scratch_tenant):
        report = pending_embed(policy=scratch_tenant.retrieval_policy)
    assert (report.embedded, report.merged, report.updated) == (1, 0, 1)
    read = caller.get(f"/api/v1/memories/{accepted['id']}").json()
    assert read["pending"] is False and read["supersedes"] == nine["id"] and read["superseded_by"] is None
    assert caller.get(f"/api/v1/memories/{nine['id']}").json()["superseded_by"] == accepted["id"]


def test_a_batch_updates_in_order(alice: Caller) -> None:
    response = alice.post(
        "/api/v1/memories", [{"content": NINE}, {"content": ELEVEN}, {"content": NINE_REWORDED}]
    )
    assert response.status_code == 201, response.content
    first, second, third = response.json()["results"]
    assert [r["outcome"] for r in (first, second, third)] == ["created", "updated", "updated"]
    assert second["supersedes"] == first["id"] and third["supersedes"] == second["id"]
    listed = [m["id"] for m in alice.get("/api/v1/memories").json()["results"]]
    assert listed == [third["id"]]


def test_erasure_by_subject_removes_every_version(scratch_tenant: Tenant) -> None:
    caller = make_caller(scratch_tenant, "support")
    nine = written(caller, NINE, data_subject="cust-9")
    eleven = written(caller, ELEVEN, data_subject="cust-9")
    stated = written(
        caller, "Dana's return flight was cancelled.", data_subject="cust-9", supersedes=eleven["id"]
    )
    assert eleven["supersedes"] == nine["id"] and stated["supersedes"] == eleven["id"]
    other = written(caller, NINE, data_subject="cust-10")  # another subject: never superseded across
    assert other["outcome"] == "created"
    with tenant_context(scratch_tenant):
        request = services.erasure_request(
            kind="subject", value="cust-9", legal_basis="Art. 17", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="pavel")
        done = finished(services.erasure_run(request_id=request.pk))
        assert done.status == ErasureStatus.DONE, done.error
        left = set(SemanticMemory.objects.values_list("pk", flat=True))
    assert {str(pk) for pk in left} == {other["id"]}


def test_context_assembly_holds_the_current_version_only(alice: Caller) -> None:
    nine = written(alice, NINE)
    eleven = written(alice, ELEVEN)
    assert eleven["supersedes"] == nine["id"]
    response = alice.post(
        "/api/v1/context",
        {"query": "When does Dana's return flight leave?", "session_id": "s-ctx", "budget": 2000},
    )
    assert response.status_code == 200, response.content
    sources = [
        s["id"]
        for section in response.json()["sections"]
        for item in section["items"]
        for s in item["sources"]
    ]
    assert eleven["id"] in sources and nine["id"] not in sources
