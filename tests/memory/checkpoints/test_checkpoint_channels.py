"""Checkpoint channel values stored per channel version (docs/decisions/0100), against the real
PostgreSQL and Redis: a save stores the values of its new versions only, every read assembles a
checkpoint's values from the versions it names (one query), checkpoints saved whole read as they
did, and the values go with their checkpoints (thread delete, legal hold, erasure)."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_tenants.utils import tenant_context

from compliance import lifecycle, services
from compliance.models import ErasureStatus
from core.redis import get_redis
from memory.checkpoints import selectors
from memory.checkpoints.models import Checkpoint, CheckpointBlob
from memory.checkpoints.services import Blob, cache_key, checkpoint_latest, checkpoint_save
from tests.compliance.conftest import finished
from tests.factories import Caller

SUBJECT = "cust-4711"


def session() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def value(text: str) -> dict[str, str]:
    return {"type": "json", "data": b64(text)}


def save(caller: Caller, thread: str, key: str, channels: dict[str, Any], **extra: Any) -> dict[str, Any]:
    answer = caller.post(
        f"/api/v1/sessions/{thread}/checkpoints",
        {
            "idempotency_key": key,
            "serialized": {"type": "json", "data": b64(key)},
            "channels": channels,
            **extra,
        },
    )
    assert answer.status_code in (200, 201), answer.content
    return dict(answer.json())


def tuple_of(caller: Caller, thread: str, key: str) -> dict[str, Any]:
    page = caller.get(f"/api/v1/sessions/{thread}/checkpoints/tuples", {"key": key, "limit": 1}).json()
    assert len(page["results"]) == 1, page
    return dict(page["results"][0])


def three_steps(caller: Caller, thread: str, **extra: Any) -> None:
    """a and b set at step 0; a changes at step 1; nothing changes at step 2."""
    save(
        caller,
        thread,
        "k0",
        {"a": {"version": "1", "value": value('"a1"')}, "b": {"version": "1", "value": value('"b1"')}},
        **extra,
    )
    save(
        caller, thread, "k1", {"a": {"version": "2", "value": value('"a2"')}, "b": {"version": "1"}}, **extra
    )
    save(caller, thread, "k2", {"a": {"version": "2"}, "b": {"version": "1"}}, **extra)


def test_a_put_with_unchanged_channels_stores_no_new_value(alice: Caller) -> None:
    thread = session()
    three_steps(alice, thread)
    with tenant_context(alice.tenant):
        stored = CheckpointBlob.objects.filter(session_id=thread).order_by("channel", "version")
        assert [(b.channel, b.version, bytes(b.value)) for b in stored] == [
            ("a", "1", b'"a1"'),
            ("a", "2", b'"a2"'),
            ("b", "1", b'"b1"'),
        ]
        assert Checkpoint.objects.get(session_id=thread, idempotency_key="k2").channel_versions == {
            "a": "2",
            "b": "1",
        }
    first, last = tuple_of(alice, thread, "k0"), tuple_of(alice, thread, "k2")
    assert first["channels"] == {
        "a": {"version": "1", "value": value('"a1"')},
        "b": {"version": "1", "value": value('"b1"')},
    }
    assert last["channels"] == {
        "a": {"version": "2", "value": value('"a2"')},
        "b": {"version": "1", "value": value('"b1"')},
    }
    # the restore (PostgreSQL, which warms the Redis copy, then Redis) and one step read the same
    with tenant_context(alice.tenant):
        get_redis().delete(cache_key(thread, alice.agent.pk))
    for source in ("postgres", "redis"):
        latest = alice.get(f"/api/v1/sessions/{thread}/checkpoints/latest")
        assert latest.headers["Engram-Source"] == source and latest.json()["channels"] == last["channels"]
    assert alice.get(f"/api/v1/sessions/{thread}/checkpoints/1").json()["channels"]["a"]["version"] == "2"


def test_a_version_without_a_stored_value_reads_without_one(alice: Caller) -> None:
    thread = session()
    save(alice, thread, "k0", {"a": {"version": "7"}})
    assert tuple_of(alice, thread, "k0")["channels"] == {"a": {"version": "7"}}


def test_a_replay_answers_the_stored_values_and_another_value_is_a_conflict(alice: Caller) -> None:
    thread = session()
    body = {"a": {"version": "1", "value": value('"a1"')}}
    first = save(alice, thread, "k0", body)
    again = save(alice, thread, "k0", body)
    assert again["replayed"] and again["channels"] == first["channels"] == body
    other = alice.post(
        f"/api/v1/sessions/{thread}/checkpoints",
        {
            "idempotency_key": "k0",
            "serialized": {"type": "json", "data": b64("k0")},
            "channels": {"a": {"version": "1", "value": value('"x"')}},
        },
    )
    assert other.status_code == 409 and "idempotency_key" in other.content.decode(), other.content


def test_checkpoints_saved_whole_read_as_before(alice: Caller) -> None:
    thread = session()
    saved = alice.post(
        f"/api/v1/sessions/{thread}/checkpoints",
        {"idempotency_key": "old", "state": {"x": 1}, "serialized": {"type": "json", "data": b64("whole")}},
    )
    assert saved.status_code == 201
    keys = ["id", "session_id", "step_index", "idempotency_key", "schema_version", "agent", "created_at",
            "checkpoint_ns", "parent_key", "metadata", "state", "plan", "serialized"]  # fmt: skip
    assert list(saved.json()) == [*keys, "replayed"]
    latest = alice.get(f"/api/v1/sessions/{thread}/checkpoints/latest")
    assert list(latest.json()) == keys and latest.json() == {k: saved.json()[k] for k in keys}
    assert list(tuple_of(alice, thread, "old")) == [*keys, "pending_writes"]
    with tenant_context(alice.tenant):
        stored = Checkpoint.objects.get(session_id=thread)
        assert stored.channel_versions == {} and not CheckpointBlob.objects.filter(session_id=thread).exists()


def test_a_restore_and_a_tuple_are_one_query_each(alice: Caller) -> None:
    thread = session()
    three_steps(alice, thread)
    with tenant_context(alice.tenant):
        alice.agent.refresh_from_db()
        with CaptureQueriesContext(connection) as restore:
            found = selectors.checkpoint_latest_document(agent=alice.agent, session_id=thread)
        assert found is not None and json.loads(found.body)["channels"]["b"]["value"] == value('"b1"')
        with CaptureQueriesContext(connection) as page:
            rows = list(selectors.checkpoint_tuples(agent=alice.agent, session_id=thread, key="k1")[:1])
            assert rows[0].channel_documents["a"]["version"] == "2" and rows[0].write_documents == []
    assert len(restore) == 1, [q["sql"] for q in restore]
    assert len(page) == 1, [q["sql"] for q in page]


def test_bad_channels_are_400s_naming_the_field(alice: Caller) -> None:
    thread = session()
    for channels, field in [
        ({"a\x00": {"version": "1"}}, "channels"),
        ({"a": {"version": ""}}, "channels"),
        ({"a": {"value": value("1")}}, "channels"),
        ({"a": {"version": "1", "value": {"type": "json", "data": "!!"}}}, "channels"),
    ]:
        answer = alice.post(
            f"/api/v1/sessions/{thread}/checkpoints",
            {"idempotency_key": "k", "serialized": {"type": "json", "data": ""}, "channels": channels},
        )
        assert answer.status_code == 400 and field in json.dumps(answer.json()), answer.content


def test_the_service_refuses_a_value_at_a_version_no_channel_names(alice: Caller) -> None:
    from core.errors import InvalidInput

    with tenant_context(alice.tenant):
        try:
            checkpoint_save(
                agent=alice.agent,
                session_id=session(),
                step_index=None,
                idempotency_key="k",
                state={},
                plan=[],
                policy=alice.tenant.working_memory_policy,
                channel_versions={"a": "2"},
                blobs=[Blob("a", "1", "json", b"1")],
            )
        except InvalidInput as exc:
            assert exc.field == "blobs[0].version"
        else:
            raise AssertionError("saved a value no version names")


def test_a_thread_delete_takes_the_values(alice: Caller) -> None:
    thread = session()
    three_steps(alice, thread)
    answer = alice.client.delete(f"/api/v1/sessions/{thread}/checkpoints")
    assert answer.status_code == 200 and answer.json()["blobs"] == 3 and answer.json()["checkpoints"] == 3
    with tenant_context(alice.tenant):
        assert not CheckpointBlob.objects.filter(session_id=thread).exists()


def test_a_hold_keeps_the_values_from_a_thread_delete(alice: Caller) -> None:
    thread = session()
    three_steps(alice, thread, data_subject=SUBJECT)
    with tenant_context(alice.tenant):
        placed = services.hold_place(
            kind="subject", value=SUBJECT, reason="case 9/2026", username="olga", four_eyes=False
        )
    answer = alice.client.delete(f"/api/v1/sessions/{thread}/checkpoints")
    assert answer.status_code == 409 and f"legal hold #{placed.pk}" in answer.json()["detail"]
    with tenant_context(alice.tenant):
        assert CheckpointBlob.objects.filter(session_id=thread).count() == 3
        # and from retention's and an erasure's removal of other rows: a held value stays
        blob = CheckpointBlob.objects.filter(session_id=thread).first()
        assert blob is not None
        lifecycle_rows = lifecycle.unheld("checkpoints", CheckpointBlob.objects.filter(pk=blob.pk))[0]
        assert not lifecycle_rows.exists()


def test_an_erasure_takes_the_subjects_values_and_leaves_the_others(alice: Caller, bob: Caller) -> None:
    mine, theirs = session(), session()
    three_steps(alice, mine, data_subject=SUBJECT)
    three_steps(bob, theirs, data_subject="cust-1")
    with tenant_context(alice.tenant):
        request = services.erasure_request(
            kind="subject", value=SUBJECT, legal_basis="Art. 17", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="pavel")
        done = finished(services.erasure_run(request_id=request.pk))
        assert done.status == ErasureStatus.DONE, done.error
        assert not CheckpointBlob.objects.filter(session_id=mine).exists()
        assert not CheckpointBlob.objects.filter(data_subject=SUBJECT).exists()
        assert CheckpointBlob.objects.filter(session_id=theirs).count() == 3
        report = json.loads(done.receipt)["verification"]["postgres"]
        assert report["checkpoint_blobs_left"] == 0 and report["checkpoint_blobs_unnamed"] == 0
    assert tuple_of(bob, theirs, "k2")["channels"]["b"]["value"] == value('"b1"')


def test_an_erased_checkpoints_values_go_when_no_checkpoint_left_names_them(alice: Caller) -> None:
    """Retention and an erasure remove checkpoints one by one: a value goes with the last one that
    names it, and stays while a checkpoint left names it."""
    from memory.checkpoints.services import checkpoints_erase

    thread = session()
    three_steps(alice, thread)
    with tenant_context(alice.tenant):
        first = Checkpoint.objects.get(session_id=thread, idempotency_key="k0")
        checkpoints_erase(checkpoint_ids=[first.pk])
        left = CheckpointBlob.objects.filter(session_id=thread).values_list("channel", "version")
        assert sorted(left) == [("a", "2"), ("b", "1")]  # a@1 was only k0's
        checkpoints_erase(
            checkpoint_ids=list(Checkpoint.objects.filter(session_id=thread).values_list("pk", flat=True))
        )
        assert not CheckpointBlob.objects.filter(session_id=thread).exists()


def test_the_restore_reads_postgres_when_no_copy_is_cached(alice: Caller) -> None:
    thread = session()
    three_steps(alice, thread)
    with tenant_context(alice.tenant):
        get_redis().delete(cache_key(thread, alice.agent.pk))
        restored = checkpoint_latest(
            agent=alice.agent, session_id=thread, policy=alice.tenant.working_memory_policy
        )
        assert restored.source == "postgres"
        data = restored.data()
        assert data is not None and data["channels"]["a"] == {"version": "2", "value": value('"a2"')}


def test_the_read_functions_keep_their_plans_for_the_session(alice: Caller) -> None:
    """The functions every checkpoint read calls per row are PL/pgSQL, whose query PostgreSQL plans
    once per session: a non-inlined SQL function's was planned on every call (decision 0116)."""
    with tenant_context(alice.tenant), connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.proname, l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
            "WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = ANY(%s)",
            [["memory_checkpoint_channels", "memory_checkpoint_pending_writes"]],
        )
        languages = dict(cursor.fetchall())
    assert languages == {
        "memory_checkpoint_channels": "plpgsql",
        "memory_checkpoint_pending_writes": "plpgsql",
    }
