"""An update the caller states (``supersedes: <id>`` on a write): the new memory is stored, the old
one is superseded by it (kept, shown as such, out of default recall and listing), the answer says
``updated`` and names the old id, the trail records it; a missing or invisible id is a 404, an
already superseded one a 409 naming the current version; history on request (``include_superseded``,
``as_of``, the versions of a memory)."""

from __future__ import annotations

import time

from django.utils import timezone
from django_tenants.utils import tenant_context

from memory.episodic.models import Event
from memory.semantic.services.supersede import SUPERSEDE_ACTION
from tests.factories import Caller, contents, make_caller, remember, requires_model, search

pytestmark = requires_model

OLD = "The quarterly review with the board is in room 4B."
NEW = "The quarterly review with the board moved to the main auditorium."


def stored(caller: Caller, content: str, **extra: object) -> dict:
    response = remember(caller, content, **extra)
    assert response.status_code in (200, 201, 202), response.content
    return response.json()


def test_a_stated_update_supersedes_the_old_memory(alice: Caller) -> None:
    old = stored(alice, OLD, session_id="s-upd")
    assert old["outcome"] == "created" and old["supersedes"] is None and old["superseded_by"] is None
    new = stored(alice, NEW, supersedes=old["id"], session_id="s-upd")
    assert new["outcome"] == "updated" and new["supersedes"] == old["id"]
    assert new["id"] != old["id"] and new["deduplicated"] is False

    got = alice.get(f"/api/v1/memories/{old['id']}").json()
    assert got["superseded_by"] == new["id"] and got["superseded_at"] is not None
    assert alice.get(f"/api/v1/memories/{new['id']}").json()["supersedes"] == old["id"]

    hits = contents(search(alice, "Where is the quarterly board review?"))
    assert hits[0] == NEW and OLD not in hits
    history = contents(
        search(alice, "Where is the quarterly board review?", filters={"include_superseded": True})
    )
    assert set(history) >= {OLD, NEW}

    listed = [m["id"] for m in alice.get("/api/v1/memories").json()["results"]]
    assert new["id"] in listed and old["id"] not in listed
    every = [m["id"] for m in alice.get("/api/v1/memories", {"include_superseded": "true"}).json()["results"]]
    assert {new["id"], old["id"]} <= set(every)

    versions = alice.get(f"/api/v1/memories/{old['id']}/versions").json()
    assert [m["id"] for m in versions["results"]] == [old["id"], new["id"]]
    assert versions["current"] == new["id"] and versions["count"] == 2

    with tenant_context(alice.tenant):
        event = Event.objects.get(payload_index__contains={"action": SUPERSEDE_ACTION})
    assert event.session_id == "s-upd" and event.payload["memory_id"] == old["id"]
    assert event.payload["superseded_by"] == new["id"] and event.payload["how"] == "stated"
    assert OLD not in event.content and NEW not in event.content


def test_as_of_reads_what_was_current_then(alice: Caller) -> None:
    old = stored(alice, OLD)
    time.sleep(0.01)
    between = timezone.now().isoformat()
    time.sleep(0.01)
    new = stored(alice, NEW, supersedes=old["id"])
    then = [m["id"] for m in alice.get("/api/v1/memories", {"as_of": between}).json()["results"]]
    assert old["id"] in then and new["id"] not in then
    hits = search(alice, "quarterly board review", filters={"as_of": between})
    assert [h["memory"]["id"] for h in hits] == [old["id"]]


def test_a_missing_or_invisible_memory_is_404(alice: Caller, bob: Caller, mallory: Caller) -> None:
    response = remember(alice, NEW, supersedes="00000000-0000-0000-0000-000000000000")
    assert response.status_code == 404 and "supersedes" in response.json()["errors"], response.content
    private = stored(bob, OLD)  # bob's private memory: alice cannot see it
    response = remember(alice, NEW, supersedes=private["id"])
    assert response.status_code == 404 and "supersedes" in response.json()["errors"]
    response = remember(mallory, NEW, supersedes=private["id"])  # another tenant
    assert response.status_code == 404
    with tenant_context(alice.tenant):
        assert not Event.objects.filter(payload_index__contains={"action": SUPERSEDE_ACTION}).exists()


def test_an_already_superseded_memory_is_409_naming_the_current_one(alice: Caller) -> None:
    old = stored(alice, OLD)
    new = stored(alice, NEW, supersedes=old["id"])
    response = remember(alice, "The quarterly board review is now online.", supersedes=old["id"])
    assert response.status_code == 409, response.content
    body = response.json()
    assert "supersedes" in body["errors"] and new["id"] in body["detail"] and body["current"] == new["id"]


def test_a_batch_names_the_item_and_stays_all_or_nothing(alice: Caller) -> None:
    old = stored(alice, OLD)
    response = alice.post(
        "/api/v1/memories",
        [{"content": NEW, "supersedes": old["id"]}, {"content": "Another.", "supersedes": old["id"]}],
    )
    assert response.status_code == 409 and "memories[1].supersedes" in response.json()["errors"]
    assert alice.get(f"/api/v1/memories/{old['id']}").json()["superseded_by"] is None
    response = alice.post(
        "/api/v1/memories", [{"content": "Tea."}, {"content": NEW, "supersedes": old["id"]}]
    )
    assert response.status_code == 201, response.content
    results = response.json()["results"]
    assert [r["outcome"] for r in results] == ["created", "updated"]
    assert results[1]["supersedes"] == old["id"]


def test_an_update_keeps_the_data_subject(alice: Caller) -> None:
    old = stored(alice, OLD, data_subject="cust-1")
    response = remember(alice, NEW, supersedes=old["id"], data_subject="cust-2")
    assert response.status_code == 400 and "supersedes" in response.json()["errors"]
    new = stored(alice, NEW, supersedes=old["id"], data_subject="cust-1")
    assert new["outcome"] == "updated"


def test_an_async_stated_update_supersedes_at_once(alice: Caller) -> None:
    old = stored(alice, OLD)
    response = remember(alice, NEW, supersedes=old["id"], write="async")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["outcome"] == "updated" and body["supersedes"] == old["id"] and body["pending"] is True
    assert alice.get(f"/api/v1/memories/{old['id']}").json()["superseded_by"] == body["id"]


def test_another_agents_shared_memory_may_be_updated(alice: Caller) -> None:
    writer = make_caller(alice.tenant, "writer")
    old = stored(writer, OLD, scope="shared")
    new = stored(alice, NEW, scope="shared", supersedes=old["id"])
    assert new["outcome"] == "updated"
    assert OLD not in contents(search(writer, "quarterly board review"))
