"""The episodic log over the API, its append-only trigger and its hash chain."""

from __future__ import annotations

import contextlib
import io

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django_tenants.utils import tenant_context

from core.tenancy import maintenance
from memory.episodic.models import Event
from memory.episodic.selectors import chain_verify
from tests.factories import UNICODE_SAMPLES, Caller, behind_the_triggers, event


def test_single_and_batch_append_form_a_chain(alice: Caller) -> None:
    one = alice.post("/api/v1/events", event("first"))
    assert one.status_code == 201, one.content
    assert one.json()["seq"] == 1 and one.json()["prev_hash"] == "0" * 64
    batch = alice.post("/api/v1/events", [event(f"turn {i}") for i in range(5)])
    assert batch.status_code == 201
    body = batch.json()
    assert body["count"] == 5
    assert [e["seq"] for e in body["results"]] == [2, 3, 4, 5, 6]
    assert body["results"][0]["prev_hash"] == one.json()["hash"]
    for previous, current in zip(body["results"], body["results"][1:], strict=False):
        assert current["prev_hash"] == previous["hash"]
    with tenant_context(alice.tenant):
        assert chain_verify().ok and chain_verify().checked == 6


def test_batch_is_all_or_nothing_and_names_the_bad_item(alice: Caller) -> None:
    response = alice.post("/api/v1/events", [event("ok"), event("bad", occurred_at="2026-03-01T10:00:00")])
    assert response.status_code == 400
    assert "events[1].occurred_at" in response.json()["errors"]
    with tenant_context(alice.tenant):
        assert Event.objects.count() == 0


def test_batch_limits(alice: Caller) -> None:
    assert alice.post("/api/v1/events", []).status_code == 400
    too_many = alice.post("/api/v1/events", [event(str(i)) for i in range(1001)])
    assert too_many.status_code == 400
    assert "events" in too_many.json()["errors"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (event(occurred_at="2026-03-01T10:00:00"), "occurred_at"),  # naive datetime
        (event(occurred_at="yesterday"), "occurred_at"),
        (event(kind="thought"), "kind"),
        (event(content=12), "content"),
        (event(payload="not an object"), "payload"),
        (event(payload=[1, 2]), "payload"),
        (event(session_id=None), "session_id"),
        (event(content="", payload={}), "content"),
        (event(content="x" * 200_001), "content"),
        (event(content="nul\x00byte"), "content"),
        (event(colour="blue"), "colour"),
    ],
)
def test_bad_event_input_is_400_naming_the_field(alice: Caller, body: dict, field: str) -> None:
    response = alice.post("/api/v1/events", body)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]


def test_malformed_json_is_400(alice: Caller) -> None:
    response = alice.client.post(
        "/api/v1/events", data=b'{"session_id": "s1",', content_type="application/json"
    )
    assert response.status_code == 400
    assert "body" in response.json()["errors"]


def test_unicode_round_trips_byte_for_byte(alice: Caller) -> None:
    created = alice.post("/api/v1/events", [event(text, payload={"note": text}) for text in UNICODE_SAMPLES])
    assert created.status_code == 201
    listed = alice.get("/api/v1/events").json()["results"]
    assert [e["content"] for e in listed] == UNICODE_SAMPLES
    assert [e["payload"]["note"] for e in listed] == UNICODE_SAMPLES


def test_list_filters_and_chronological_cursor(alice: Caller, bob: Caller) -> None:
    alice.post(
        "/api/v1/events",
        [
            event("late", occurred_at="2026-03-03T00:00:00Z"),
            event("early", occurred_at="2026-03-01T00:00:00Z"),
            event("tool", kind="tool_call", session_id="s2", occurred_at="2026-03-02T00:00:00+02:00"),
        ],
    )
    bob.post("/api/v1/events", event("bob speaks about Lisbon", occurred_at="2026-03-02T12:00:00Z"))

    def contents(params: dict) -> list[str]:
        response = alice.get("/api/v1/events", params)
        assert response.status_code == 200, response.content
        return [e["content"] for e in response.json()["results"]]

    assert contents({}) == ["early", "tool", "bob speaks about Lisbon", "late"]
    assert contents({"session_id": "s2"}) == ["tool"]
    assert contents({"agent": "bob"}) == ["bob speaks about Lisbon"]
    assert contents({"kind": "tool_call,decision"}) == ["tool"]
    assert contents({"since": "2026-03-02T00:00:00Z", "until": "2026-03-03T00:00:00Z"}) == [
        "bob speaks about Lisbon"
    ]
    assert contents({"q": "lisbon"}) == ["bob speaks about Lisbon"]

    first = alice.get("/api/v1/events", {"limit": 3}).json()
    assert [e["content"] for e in first["results"]] == ["early", "tool", "bob speaks about Lisbon"]
    second = alice.client.get(first["next"]).json()
    assert [e["content"] for e in second["results"]] == ["late"]
    assert second["next"] is None


@pytest.mark.parametrize(
    "params", [{"colour": "blue"}, {"since": "2026-03-01T00:00:00"}, {"kind": "dream"}, {"limit": 0}]
)
def test_bad_list_parameters_are_400(alice: Caller, params: dict) -> None:
    response = alice.get("/api/v1/events", params)
    assert response.status_code == 400
    assert set(params) <= set(response.json()["errors"])


def test_other_tenant_sees_no_events(alice: Caller, mallory: Caller) -> None:
    alice.post("/api/v1/events", event("secret plans for Lisbon"))
    assert mallory.get("/api/v1/events").json()["results"] == []
    assert mallory.get("/api/v1/events", {"q": "lisbon"}).json()["results"] == []
    mallory.post("/api/v1/events", event("beta's own"))
    assert [e["content"] for e in mallory.get("/api/v1/events").json()["results"]] == ["beta's own"]
    assert [e["seq"] for e in mallory.get("/api/v1/events").json()["results"]] == [1]  # a chain per tenant


@pytest.mark.parametrize(
    ("statement", "as_owner", "refusal"),
    [
        ("UPDATE memory_event SET content = 'rewritten'", False, "append-only"),
        ("DELETE FROM memory_event", False, "append-only"),
        # the tenant's role may not truncate at all; the tables' owner is stopped by the trigger
        ("TRUNCATE memory_event CASCADE", False, "permission denied for table memory_event"),
        ("TRUNCATE memory_event CASCADE", True, "append-only"),
    ],
)
def test_raw_sql_cannot_change_or_remove_events(
    alice: Caller, statement: str, as_owner: bool, refusal: str
) -> None:
    alice.post("/api/v1/events", event("immutable"))
    with tenant_context(alice.tenant):
        with connection.cursor() as cursor:
            # flush the deferred FK checks of the insert, or TRUNCATE refuses for that reason instead
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        with (
            pytest.raises(DatabaseError, match=refusal),
            maintenance() if as_owner else contextlib.nullcontext(),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(statement)
        assert list(Event.objects.values_list("content", flat=True)) == ["immutable"]


def test_verify_chain_finds_a_row_altered_behind_the_triggers_back(alice: Caller) -> None:
    alice.post("/api/v1/events", [event(f"turn {i}") for i in range(10)])
    out = io.StringIO()
    call_command("verify_chain", tenant="alpha", stdout=out)
    assert "chain intact: 10 events verified" in out.getvalue()

    with tenant_context(alice.tenant), behind_the_triggers() as cursor:
        # the tables' owner can switch the trigger off; the chain still tells
        cursor.execute("UPDATE memory_event SET content = 'forged' WHERE seq = 7")
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("verify_chain", tenant="alpha", stdout=out)
    assert exit_info.value.code == 1
    assert "BROKEN at event #7" in out.getvalue()
    assert "content does not match its hash" in out.getvalue()


def test_verify_chain_finds_a_deleted_row(alice: Caller) -> None:
    alice.post("/api/v1/events", [event(f"turn {i}") for i in range(5)])
    with tenant_context(alice.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute("DELETE FROM memory_event WHERE seq IN (3, 5)")
        report = chain_verify()
    assert not report.ok and report.broken_seq == 4 and "gap" in report.reason


def test_admin_shows_events_read_only(alice: Caller, client, django_user_model) -> None:  # type: ignore[no-untyped-def]
    alice.post("/api/v1/events", event("visible in the admin"))
    with tenant_context(alice.tenant):
        django_user_model.objects.create_superuser("officer", "o@example.com", "pw-123456789")
        event_id = Event.objects.get().pk
    host = {"HTTP_HOST": "alpha.localhost"}
    client.post("/admin/login/", {"username": "officer", "password": "pw-123456789"}, **host)
    page = client.get("/admin/memory/event/", **host)
    assert page.status_code == 200
    assert "visible in the admin" in page.content.decode()
    detail = client.get(f"/admin/memory/event/{event_id}/change/", **host)
    assert detail.status_code == 200
    assert 'name="_save"' not in detail.content.decode()  # no save button: read-only
    assert client.get("/admin/memory/event/add/", **host).status_code == 403
    # the same officer does not exist in tenant beta
    other = client.get("/admin/memory/event/", HTTP_HOST="beta.localhost")
    assert other.status_code == 302


def test_event_list_query_count_does_not_grow_with_rows(alice: Caller) -> None:
    def queries_for_listing() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert alice.get("/api/v1/events").status_code == 200
        return len(ctx.captured_queries)

    alice.post(
        "/api/v1/events",
        [{"session_id": "s", "kind": "message", "content": "x", "occurred_at": "2026-01-01T00:00:00Z"}],
    )
    few = queries_for_listing()
    alice.post(
        "/api/v1/events",
        [
            {"session_id": "s", "kind": "message", "content": str(i), "occurred_at": "2026-01-01T00:00:00Z"}
            for i in range(50)
        ],
    )
    assert queries_for_listing() == few
