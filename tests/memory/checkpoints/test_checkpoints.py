"""Checkpoints (state hydration) against the real PostgreSQL and Redis, ``/metrics`` and its admin page.

The tenants here are committed (not rolled back), so a save really commits and its
``transaction.on_commit`` hook really writes Redis, as in production. Session ids are fresh per test.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection, transaction
from django.test import Client, RequestFactory
from django_tenants.utils import tenant_context
from prometheus_client.parser import text_string_to_metric_families

from core.errors import InvalidInput
from core.metrics import record_lookup
from core.redis import get_redis
from devstack import free_port
from devstack.redis_server import EmbeddedRedis
from memory.checkpoints import services
from memory.checkpoints.models import Checkpoint, checkpoint_fingerprint
from tenants.models import Tenant
from tests.factories import Caller, make_caller

DEGRADED = "redis-unavailable"


@pytest.fixture
def trio_tenants(committed_tenants: tuple[Tenant, Tenant]) -> tuple[Tenant, Tenant]:
    """The trio in committed tenants (a save really commits and its after-commit hook really writes Redis)."""
    return committed_tenants


@pytest.fixture
def session() -> str:
    return f"sess-{uuid.uuid4().hex[:12]}"


def url(session_id: str, suffix: str = "") -> str:
    return f"/api/v1/sessions/{session_id}/checkpoints{suffix}"


def body(step: int, key: str | None = None, **extra: object) -> dict[str, object]:
    return {
        "step_index": step,
        "idempotency_key": key or f"key-{step}",
        "state": {"step": step, "notes": ["searched", "ranked"], "score": 0.5, "nested": {"ok": True}},
        "plan": [{"tool": "search", "done": True}, {"tool": "summarise", "done": False}],
        "schema_version": 2,
        **extra,
    }


def save(caller: Caller, session_id: str, data: dict[str, object]):  # type: ignore[no-untyped-def]
    return caller.post(url(session_id), data)


def latest(caller: Caller, session_id: str):  # type: ignore[no-untyped-def]
    return caller.get(url(session_id, "/latest"))


def redis_key(caller: Caller, session_id: str) -> str:
    """The Redis copy of the caller's latest checkpoint in the session (one per agent)."""
    return "{" + caller.tenant.schema_name + "}:ckpt:" + session_id + ":" + str(caller.agent.pk)


def stored_count(tenant: Tenant, session_id: str) -> int:
    with tenant_context(tenant):
        return Checkpoint.objects.filter(session_id=session_id).count()


# --- save and restore ----------------------------------------------------------------------------------


def test_save_commits_then_caches_and_restore_reads_redis(alice: Caller, session: str) -> None:
    saved = save(alice, session, body(1))
    assert saved.status_code == 201, saved.content
    doc = saved.json()
    assert doc["replayed"] is False and doc["step_index"] == 1 and doc["agent"] == "alice"
    assert doc["schema_version"] == 2 and doc["created_at"].endswith("Z")
    assert "Engram-Degraded" not in saved.headers

    key = redis_key(alice, session)
    ttl = get_redis().ttl(key)
    assert 0 < ttl <= alice.tenant.checkpoint_cache_ttl_seconds
    assert int(get_redis().hget(key, "step")) == 1

    restored = latest(alice, session)
    assert restored.status_code == 200
    assert restored.headers["Engram-Source"] == "redis"
    assert restored["Content-Type"] == "application/json"
    assert "Engram-Degraded" not in restored.headers
    assert restored.json() == {k: v for k, v in doc.items() if k != "replayed"}


def test_restore_falls_back_to_postgres_and_rewarms_redis(alice: Caller, session: str) -> None:
    save(alice, session, body(1))
    saved = save(alice, session, body(2)).json()
    get_redis().delete(redis_key(alice, session))

    cold = latest(alice, session)
    assert cold.status_code == 200 and cold.headers["Engram-Source"] == "postgres"
    assert "Engram-Degraded" not in cold.headers
    assert cold.json()["step_index"] == 2 and cold.json()["state"] == saved["state"]
    assert get_redis().exists(redis_key(alice, session))

    warm = latest(alice, session)
    assert warm.headers["Engram-Source"] == "redis"
    assert warm.json() == cold.json()


def test_a_restore_from_postgres_is_answered_before_redis_is_rewarmed(alice: Caller, session: str) -> None:
    """The response is whole before the Redis copy is written: the re-warm runs when the server
    closes the response it has sent (here the WSGI handler's response, read and then closed)."""
    save(alice, session, body(1))
    get_redis().delete(redis_key(alice, session))
    statuses: list[str] = []
    environ = RequestFactory().get(url(session, "/latest"), HTTP_AUTHORIZATION=f"Bearer {alice.key}").environ
    response = WSGIHandler()(environ, lambda status, headers, exc_info=None: statuses.append(status))
    try:
        assert statuses == ["200 OK"] and json.loads(b"".join(response))["step_index"] == 1
        assert response["Engram-Source"] == "postgres" and "Engram-Degraded" not in response
        assert not get_redis().exists(redis_key(alice, session))  # the answer did not wait for Redis
    finally:
        response.close()
    assert int(get_redis().hget(redis_key(alice, session), "step")) == 1
    assert latest(alice, session).headers["Engram-Source"] == "redis"


def test_a_late_rewarm_never_replaces_a_newer_copy(alice: Caller, session: str) -> None:
    """A re-warm that runs after a newer save cached its copy leaves the newer copy."""
    save(alice, session, body(1))
    get_redis().delete(redis_key(alice, session))
    with tenant_context(alice.tenant):
        cold = services.checkpoint_latest(
            agent=alice.agent,
            session_id=session,
            policy=alice.tenant.working_memory_policy,
            defer_rewarm=True,
        )
    assert cold.source == "postgres" and cold.rewarm is not None and not cold.degraded
    assert not get_redis().exists(redis_key(alice, session))  # not written before it is run
    assert save(alice, session, body(2)).status_code == 201
    assert cold.rewarm() is True  # Redis answered; its script kept the newer step
    assert int(get_redis().hget(redis_key(alice, session), "step")) == 2
    assert latest(alice, session).json()["step_index"] == 2


def test_no_checkpoint_is_404_naming_the_session(alice: Caller, session: str) -> None:
    response = latest(alice, session)
    assert response.status_code == 404
    assert "session_id" in response.json()["errors"]
    assert response.headers["Engram-Source"] == "postgres"


def test_latest_is_the_highest_step_and_listing_is_in_step_order(alice: Caller, session: str) -> None:
    for step in (0, 3, 10):
        assert save(alice, session, body(step)).status_code == 201
    # (another agent in the session has a stream of its own: tests/test_session_ownership.py)
    assert latest(alice, session).json()["step_index"] == 10
    listing = alice.get(url(session)).json()
    assert [c["step_index"] for c in listing["results"]] == [0, 3, 10]
    assert "state" not in listing["results"][0] and listing["next"] is None
    page = alice.get(url(session), {"limit": 2}).json()
    assert [c["step_index"] for c in page["results"]] == [0, 3] and page["next"] is not None
    rest = alice.client.get(page["next"]).json()
    assert [c["step_index"] for c in rest["results"]] == [10] and rest["next"] is None
    one = alice.get(url(session, "/3"))
    assert one.status_code == 200 and one.json()["state"]["step"] == 3
    assert alice.get(url(session, "/4")).status_code == 404


# --- idempotency and ordering ----------------------------------------------------------------------------


def test_replay_with_same_key_and_body_returns_the_stored_checkpoint(alice: Caller, session: str) -> None:
    first = save(alice, session, body(1)).json()
    reordered = dict(reversed(list(body(1).items())))  # same content, another key order
    replay = save(alice, session, reordered)
    assert replay.status_code == 200
    assert replay.json()["replayed"] is True and replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json()["id"] == first["id"] and replay.json()["created_at"] == first["created_at"]
    assert stored_count(alice.tenant, session) == 1


def test_same_key_with_another_body_is_409_naming_the_key(alice: Caller, session: str) -> None:
    save(alice, session, body(1))
    changed = body(1)
    changed["state"] = {"step": 1, "notes": ["something else"]}
    response = save(alice, session, changed)
    assert response.status_code == 409
    assert list(response.json()["errors"]) == ["idempotency_key"]
    assert "state" in response.json()["detail"]
    assert stored_count(alice.tenant, session) == 1


@pytest.mark.parametrize("step", [4, 5])
def test_step_not_after_the_latest_is_409_with_the_latest(alice: Caller, session: str, step: int) -> None:
    save(alice, session, body(5))
    response = save(alice, session, body(step, key="a-new-key"))
    assert response.status_code == 409
    assert list(response.json()["errors"]) == ["step_index"]
    assert "step 5" in response.json()["detail"]
    assert latest(alice, session).json()["step_index"] == 5


def test_concurrent_saves_of_one_step_store_exactly_one(alice: Caller, session: str) -> None:
    callers = [alice, make_caller(alice.tenant, "alice")]
    barrier = threading.Barrier(len(callers))
    statuses: list[int] = []

    def write(caller: Caller, key: str) -> None:
        try:
            barrier.wait()
            statuses.append(save(caller, session, body(7, key=key)).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(c, f"racer-{i}")) for i, c in enumerate(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [201, 409]
    assert stored_count(alice.tenant, session) == 1


def test_concurrent_saves_without_a_step_take_consecutive_steps(alice: Caller, session: str) -> None:
    """The stream's lock is taken before the step is read (a check against a snapshot from before
    the wait would give two racers the same step: a 500 from the unique constraint)."""
    racers, each = 4, 4
    callers = [make_caller(alice.tenant, "alice") for _ in range(racers)]
    barrier = threading.Barrier(racers)
    statuses: list[int] = []

    def write(caller: Caller, n: int) -> None:
        try:
            barrier.wait()
            for i in range(each):
                data = {k: v for k, v in body(0, key=f"racer-{n}-{i}").items() if k != "step_index"}
                statuses.append(save(caller, session, data).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(c, n)) for n, c in enumerate(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [201] * (racers * each)
    with tenant_context(alice.tenant):
        steps = list(Checkpoint.objects.filter(session_id=session).values_list("step_index", flat=True))
    assert sorted(steps) == list(range(racers * each))


def test_fingerprints_hash_the_canonical_document_they_always_hashed(alice: Caller, session: str) -> None:
    """Stored fingerprints stay valid: the document is built from its parts and finished in
    PostgreSQL when PostgreSQL chooses the step, and still hashes what it hashed before."""

    def before(step: int, fields: dict[str, object]) -> str:  # the definition fingerprints were made by
        doc = {"step_index": step, "state": fields["state"], "plan": fields["plan"]}
        doc["schema_version"] = fields["schema_version"]
        for name in ("checkpoint_ns", "parent_key", "metadata", "serialized_type"):
            if fields.get(name):
                doc[name] = fields[name]
        if fields.get("serialized") is not None:
            doc["serialized"] = hashlib.sha256(fields["serialized"]).hexdigest()  # type: ignore[arg-type]
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    plain: dict[str, object] = {
        "state": {"b": [1, {"z": None, "a": "é"}], "a": 1.5},
        "plan": [],
        "schema_version": 1,
    }
    langgraph: dict[str, object] = {
        **plain,
        "state": {"emoji": "😀", "quote": '"\\', "ctl": "\t\n"},
        "plan": [{"tool": "x"}],
        "schema_version": 3,
        "checkpoint_ns": "inner|é",
        "parent_key": "p-1",
        "metadata": {"source": "loop", "step": 2, "nested": {"k": [True, False]}},
        "serialized_type": "msgpack",
        "serialized": b"\x00\xffbytes",
    }
    policy = alice.tenant.working_memory_policy
    with tenant_context(alice.tenant):
        for n, fields in enumerate([plain, langgraph]):
            assert checkpoint_fingerprint(step_index=7, **fields) == before(7, fields)  # type: ignore[arg-type]
            serialized = fields.get("serialized")
            args = {k: v for k, v in fields.items() if k not in ("serialized", "serialized_type")}
            saved = services.checkpoint_save(
                agent=alice.agent,
                session_id=f"{session}-{n}",
                step_index=None,  # PostgreSQL picks 0 and finishes the hash
                idempotency_key="k",
                policy=policy,
                serialized=None if serialized is None else (str(fields["serialized_type"]), serialized),  # type: ignore[arg-type]
                **args,  # type: ignore[arg-type]
            ).checkpoint
            stored = Checkpoint.objects.get(pk=saved.pk)
            assert stored.step_index == 0 and stored.fingerprint == saved.fingerprint == before(0, fields)
            replay = services.checkpoint_save(
                agent=alice.agent,
                session_id=f"{session}-{n}",
                step_index=None,
                idempotency_key="k",
                policy=policy,
                serialized=None if serialized is None else (str(fields["serialized_type"]), serialized),  # type: ignore[arg-type]
                **args,  # type: ignore[arg-type]
            )
            assert replay.replayed and replay.checkpoint.pk == saved.pk


def test_restore_from_postgres_is_the_document_the_save_cached(alice: Caller, session: str) -> None:
    """The save's copy (its canonical JSON spliced in) and the one rebuilt from PostgreSQL (jsonb
    text spliced in) are the same document as ``Checkpoint.document()``."""
    policy = alice.tenant.working_memory_policy
    with tenant_context(alice.tenant):
        result = services.checkpoint_save(
            agent=alice.agent,
            session_id=session,
            step_index=4,
            idempotency_key="k4",
            state={"z": 1, "a": {"é": ["😀", None, 2.5]}},
            plan=[{"tool": "search"}],
            schema_version=2,
            policy=policy,
            data_subject="subject-9",
            checkpoint_ns="inner",
            parent_key="k3",
            metadata={"source": "loop"},
            serialized=("msgpack", b"\x81\xa1a\x01"),
        )
        expected = json.loads(json.dumps(Checkpoint.objects.get(pk=result.checkpoint.pk).document()))
        assert json.loads(json.dumps(result.checkpoint.document())) == expected
        hot = services.checkpoint_latest(
            agent=alice.agent, session_id=session, policy=policy, checkpoint_ns="inner"
        )
        assert hot.source == "redis" and hot.data() == expected
        get_redis().delete(services.cache_key(session, alice.agent.pk, "inner"))
        cold = services.checkpoint_latest(
            agent=alice.agent, session_id=session, policy=policy, checkpoint_ns="inner"
        )
        assert cold.source == "postgres" and cold.data() == expected
        assert services.checkpoint_latest(agent=alice.agent, session_id=session, policy=policy).body is None


@pytest.mark.parametrize(
    ("state", "refused"),
    [
        ({"text": "\\u0000"}, False),  # the six characters of an escape, not a NUL
        ({"text": "\\\\u0000"}, False),
        ({"text": "\\\x00"}, True),  # a backslash, then a NUL
        ({"nul\x00key": 1}, True),
        ({"deep": [{"x": ["a\x00"]}]}, True),
    ],
)
def test_nul_characters_are_told_from_text_that_spells_an_escape(
    alice: Caller, session: str, state: dict[str, object], refused: bool
) -> None:
    response = save(alice, session, {**body(1), "state": state})
    if refused:
        assert response.status_code == 400 and list(response.json()["errors"]) == ["state"], response.content
    else:
        assert response.status_code == 201, response.content
        assert latest(alice, session).json()["state"] == state


def test_the_service_refuses_a_data_subject_longer_than_its_column(alice: Caller, session: str) -> None:
    with tenant_context(alice.tenant), pytest.raises(InvalidInput) as refused:
        services.checkpoint_save(
            agent=alice.agent,
            session_id=session,
            step_index=1,
            idempotency_key="k1",
            state={},
            plan=[],
            policy=alice.tenant.working_memory_policy,
            data_subject="x" * 201,
        )
    assert refused.value.field == "data_subject"


# --- validation --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"state": ["not", "an", "object"]}, "state"),
        ({"state": "text"}, "state"),
        ({"plan": {"not": "a list"}}, "plan"),
        ({"step_index": "3"}, "step_index"),
        ({"step_index": 1.5}, "step_index"),
        ({"step_index": True}, "step_index"),
        ({"step_index": -1}, "step_index"),
        ({"step_index": 2**53}, "step_index"),
        ({"schema_version": 0}, "schema_version"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"idempotency_key": "x" * 256}, "idempotency_key"),
        ({"idempotency_key": "tab\there"}, "idempotency_key"),
        ({"state": {"text": "nul\x00byte"}}, "state"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_malformed_checkpoints_are_400_naming_the_field(
    alice: Caller, session: str, change: dict[str, object], field: str
) -> None:
    response = save(alice, session, body(1, **change))
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]
    assert stored_count(alice.tenant, session) == 0


def test_missing_state_bad_session_id_and_bad_json_are_400(alice: Caller, session: str) -> None:
    data = body(1)
    del data["state"]
    assert "state" in save(alice, session, data).json()["errors"]
    bad_id = alice.get("/api/v1/sessions/bad%24id/checkpoints/latest")
    assert bad_id.status_code == 400 and "session_id" in bad_id.json()["errors"]
    assert save(alice, "bad%24id", body(1)).status_code == 400
    raw = alice.client.post(url(session), "{not json", content_type="application/json")
    assert raw.status_code == 400 and "body" in raw.json()["errors"]


def test_oversized_state_is_413(alice: Caller, session: str) -> None:
    big = {"blob": "x" * services.MAX_STATE_BYTES}
    response = save(alice, session, body(1, state=big))
    assert response.status_code == 413
    assert list(response.json()["errors"]) == ["state"]
    just_fits = {"blob": "x" * (services.MAX_STATE_BYTES - len('{"blob":""}'))}
    assert save(alice, session, body(1, state=just_fits)).status_code == 201


# --- tenant isolation ---------------------------------------------------------------------------------------


def test_the_same_session_id_in_two_tenants_never_meets(alice: Caller, mallory: Caller, session: str) -> None:
    save(alice, session, body(3))
    assert latest(mallory, session).status_code == 404
    assert mallory.get(url(session)).json()["results"] == []
    assert mallory.get(url(session, "/3")).status_code == 404
    # mallory's own step 1 is no conflict with alice's step 3: nothing is shared
    assert save(mallory, session, body(1, state={"owner": "mallory"})).status_code == 201
    assert latest(alice, session).json()["state"]["step"] == 3
    assert latest(mallory, session).json()["state"] == {"owner": "mallory"}

    redis = get_redis()
    alice_key, mallory_key = redis_key(alice, session), redis_key(mallory, session)
    assert json.loads(redis.hget(alice_key, "body"))["agent"] == "alice"
    assert json.loads(redis.hget(mallory_key, "body"))["agent"] == "mallory"
    assert stored_count(alice.tenant, session) == stored_count(mallory.tenant, session) == 1
    # the outsider's key cannot even name the other tenant's schema
    forged = Client().get(
        url(session, "/latest"),
        HTTP_AUTHORIZATION="Bearer "
        + mallory.key.replace(mallory.tenant.schema_name, alice.tenant.schema_name),
    )
    assert forged.status_code == 401


# --- on_commit, honestly ---------------------------------------------------------------------------------------


def test_redis_is_written_only_after_commit_and_never_for_a_rollback(alice: Caller, session: str) -> None:
    policy = alice.tenant.working_memory_policy
    key = redis_key(alice, session)
    with tenant_context(alice.tenant):
        with transaction.atomic():
            result = services.checkpoint_save(
                agent=alice.agent,
                session_id=session,
                step_index=1,
                idempotency_key="k1",
                state={"a": 1},
                plan=[],
                policy=policy,
            )
            assert result.cached is None and not get_redis().exists(key)
        assert result.cached is True and get_redis().exists(key)

        with pytest.raises(RuntimeError), transaction.atomic():
            services.checkpoint_save(
                agent=alice.agent,
                session_id=session,
                step_index=2,
                idempotency_key="k2",
                state={"a": 2},
                plan=[],
                policy=policy,
            )
            raise RuntimeError("roll back")
        assert int(get_redis().hget(key, "step")) == 1
        assert Checkpoint.objects.filter(session_id=session).count() == 1


# --- Redis down ----------------------------------------------------------------------------------------------


@pytest.fixture
def own_redis(settings, tmp_path: Path) -> Iterator[EmbeddedRedis]:  # type: ignore[no-untyped-def]
    """A real redis-server of this test's own, on a free port, that the test may stop and restart."""
    server = EmbeddedRedis(tmp_path / "redis", free_port())
    settings.REDIS_URL = server.start()
    try:
        yield server
    finally:
        server.stop()


def test_restore_with_redis_stopped_mid_test_uses_postgres_and_rewarms_after(
    alice: Caller, session: str, own_redis: EmbeddedRedis
) -> None:
    assert save(alice, session, body(1)).status_code == 201
    assert latest(alice, session).headers["Engram-Source"] == "redis"

    own_redis.stop()
    down = latest(alice, session)
    assert down.status_code == 200 and down.json()["step_index"] == 1
    assert down.headers["Engram-Source"] == "postgres" and down.headers["Engram-Degraded"] == DEGRADED

    saved_while_down = save(alice, session, body(2))
    assert saved_while_down.status_code == 201 and saved_while_down.headers["Engram-Degraded"] == DEGRADED
    assert latest(alice, session).json()["step_index"] == 2  # still from PostgreSQL

    own_redis.start()  # same port, empty (no persistence): the copy must be rebuilt
    back = latest(alice, session)
    assert back.headers["Engram-Source"] == "postgres" and "Engram-Degraded" not in back.headers
    assert back.json()["step_index"] == 2
    again = latest(alice, session)
    assert again.headers["Engram-Source"] == "redis" and again.json() == back.json()
    # nothing saved in PostgreSQL was lost
    listing = alice.get(url(session)).json()
    assert [c["step_index"] for c in listing["results"]] == [1, 2]


def test_a_copy_left_behind_by_an_outage_is_not_served(alice: Caller, session: str, settings) -> None:  # type: ignore[no-untyped-def]
    """Redis keeps its data but this process cannot reach it while step 2 is saved (a network split)."""
    save(alice, session, body(1))
    reachable = settings.REDIS_URL
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    assert save(alice, session, body(2)).headers["Engram-Degraded"] == DEGRADED
    settings.REDIS_URL = reachable
    assert int(get_redis().hget(redis_key(alice, session), "step")) == 1  # the stale copy
    restored = latest(alice, session)
    assert restored.json()["step_index"] == 2 and restored.headers["Engram-Source"] == "postgres"
    assert latest(alice, session).headers["Engram-Source"] == "redis"


# --- /metrics and the admin page ------------------------------------------------------------------------------


def lookups(text: str, **labels: str) -> float:
    """The value of ``engram_working_memory_lookups_total`` with exactly these labels (0 if absent)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "engram_working_memory_lookups_total" and sample.labels == labels:
                return sample.value
    return 0.0


def test_metrics_from_loopback_count_checkpoint_hits_and_misses(alice: Caller, session: str) -> None:
    labels = {"tenant": alice.tenant.schema_name, "agent": "alice", "layer": "checkpoint"}
    before = Client().get("/metrics")
    assert before.status_code == 200 and before["Content-Type"].startswith("text/plain")
    save(alice, session, body(1))
    get_redis().delete(redis_key(alice, session))
    latest(alice, session)  # miss: from PostgreSQL
    latest(alice, session)  # hit: from Redis
    latest(alice, session)  # hit
    after = Client().get("/metrics").content.decode()
    text = before.content.decode()
    assert lookups(after, **labels, result="hit") - lookups(text, **labels, result="hit") == 2
    assert lookups(after, **labels, result="miss") - lookups(text, **labels, result="miss") == 1
    # the same view on a tenant host
    assert Client().get("/metrics", HTTP_HOST=f"{alice.tenant.domains.first().domain}").status_code == 200


def test_metrics_refuse_remote_clients_and_need_the_token_when_set(settings) -> None:  # type: ignore[no-untyped-def]
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 403
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 200
    settings.ENGRAM = {**settings.ENGRAM, "METRICS_TOKEN": "s3cret-token"}
    assert Client().get("/metrics").status_code == 403  # loopback is not enough any more
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    remote = Client(REMOTE_ADDR="10.1.2.3")
    assert remote.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 200
    assert remote.post("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 405


def test_admin_page_shows_this_tenants_counters_to_staff_only(alice: Caller, mallory: Caller) -> None:
    host = alice.tenant.domains.first().domain
    with tenant_context(alice.tenant):
        record_lookup(agent="alice", layer="checkpoint", hit=True)
        User = get_user_model()
        if not User.objects.filter(username="officer").exists():
            User.objects.create_superuser("officer", "officer@example.com", "pw-123456789")
            User.objects.create_user("clerk", "clerk@example.com", "pw-123456789")
    with tenant_context(mallory.tenant):
        record_lookup(agent="mallory", layer="checkpoint", hit=False)

    anonymous = Client().get("/admin/metrics/", HTTP_HOST=host)
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    clerk = Client()
    clerk.post("/admin/login/", {"username": "clerk", "password": "pw-123456789"}, HTTP_HOST=host)
    assert clerk.get("/admin/metrics/", HTTP_HOST=host).status_code == 302

    officer = Client()
    officer.post("/admin/login/", {"username": "officer", "password": "pw-123456789"}, HTTP_HOST=host)
    page = officer.get("/admin/metrics/", HTTP_HOST=host)
    assert page.status_code == 200
    html = page.content.decode()
    assert "alice" in html and "checkpoint" in html and "mallory" not in html
    assert "/admin/metrics/" in officer.get("/admin/", HTTP_HOST=host).content.decode()
    changelist = officer.get("/admin/memory/checkpoint/", HTTP_HOST=host)
    assert changelist.status_code == 200
