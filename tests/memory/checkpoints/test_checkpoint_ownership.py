"""Checkpoints are per agent within a session: no agent writes into or reads another's stream."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django_tenants.utils import schema_context, tenant_context

from core.redis import get_redis
from devstack import free_port
from memory.checkpoints.models import Checkpoint
from tenants.models import Tenant
from tests.factories import Caller


@pytest.fixture
def trio_tenants(committed_tenants: tuple[Tenant, Tenant]) -> tuple[Tenant, Tenant]:
    """The trio in committed tenants (a save really commits and its after-commit hook really writes Redis)."""
    return committed_tenants


@pytest.fixture
def session() -> str:
    return f"sess-{uuid.uuid4().hex[:12]}"


def ckpt_url(session_id: str, suffix: str = "") -> str:
    return f"/api/v1/sessions/{session_id}/checkpoints{suffix}"


def ckpt(step: int, key: str | None = None, **state: object) -> dict[str, object]:
    return {
        "step_index": step,
        "idempotency_key": key or f"key-{step}",
        "state": {"step": step, **state},
        "plan": [{"tool": "search", "done": step > 0}],
    }


def ckpt_redis_key(caller: Caller, session_id: str) -> str:
    return "{" + caller.tenant.schema_name + "}:ckpt:" + session_id + ":" + str(caller.agent.pk)


def steps(caller: Caller, session_id: str) -> list[tuple[int, str]]:
    listing = caller.get(ckpt_url(session_id))
    assert listing.status_code == 200, listing.content
    return [(c["step_index"], c["agent"]) for c in listing.json()["results"]]


def test_a_teammate_can_neither_read_nor_change_what_the_first_agent_restores(
    alice: Caller, bob: Caller, session: str
) -> None:
    assert alice.post(ckpt_url(session), ckpt(1, by="alice")).status_code == 201
    assert alice.post(ckpt_url(session), ckpt(2, by="alice")).status_code == 201
    alices = alice.get(ckpt_url(session, "/latest")).json()

    # bob in the same session sees none of alice's private state
    nothing = bob.get(ckpt_url(session, "/latest"))
    assert nothing.status_code == 404, nothing.content
    assert "session_id" in nothing.json()["errors"]
    assert steps(bob, session) == []
    assert bob.get(ckpt_url(session, "/2")).status_code == 404

    # bob's save (a later step, a new key) starts his own stream...
    saved = bob.post(ckpt_url(session), ckpt(5, by="bob"))
    assert saved.status_code == 201, saved.content
    assert saved.json()["agent"] == "bob"

    # ...and alice restores exactly what she saved, from Redis and from PostgreSQL
    restored = alice.get(ckpt_url(session, "/latest"))
    assert restored.headers["Engram-Source"] == "redis"
    assert restored.json() == alices and restored.json()["state"]["by"] == "alice"
    get_redis().delete(ckpt_redis_key(alice, session))
    cold = alice.get(ckpt_url(session, "/latest"))
    assert cold.headers["Engram-Source"] == "postgres" and cold.json() == alices
    assert steps(alice, session) == [(1, "alice"), (2, "alice")]
    assert alice.get(ckpt_url(session, "/5")).status_code == 404
    assert alice.get(ckpt_url(session, "/2")).json()["state"]["by"] == "alice"

    # bob sees only his own
    assert bob.get(ckpt_url(session, "/latest")).json()["state"] == {"step": 5, "by": "bob"}
    assert steps(bob, session) == [(5, "bob")]
    assert bob.get(ckpt_url(session, "/5")).status_code == 200
    assert bob.get(ckpt_url(session, "/1")).status_code == 404

    # one Redis copy per agent; none under the session alone
    redis = get_redis()
    assert json.loads(redis.hget(ckpt_redis_key(alice, session), "body"))["agent"] == "alice"
    assert json.loads(redis.hget(ckpt_redis_key(bob, session), "body"))["agent"] == "bob"
    assert not redis.exists("{" + alice.tenant.schema_name + "}:ckpt:" + session)


def test_step_indexes_and_idempotency_keys_are_per_agent(alice: Caller, bob: Caller, session: str) -> None:
    first = alice.post(ckpt_url(session), ckpt(3, key="shared-key", by="alice"))
    assert first.status_code == 201

    # the same key with another body, and a step not after alice's, are no conflict for bob
    own_key = bob.post(ckpt_url(session), ckpt(1, key="shared-key", by="bob"))
    assert own_key.status_code == 201, own_key.content
    same_step = bob.post(ckpt_url(session), ckpt(3, key="bob-3", by="bob"))
    assert same_step.status_code == 201, same_step.content
    assert bob.post(ckpt_url(session), ckpt(9, key="bob-9", by="bob")).status_code == 201

    # each agent's replay returns its own checkpoint
    replay = alice.post(ckpt_url(session), ckpt(3, key="shared-key", by="alice"))
    assert replay.status_code == 200 and replay.json()["id"] == first.json()["id"]
    bobs_replay = bob.post(ckpt_url(session), ckpt(1, key="shared-key", by="bob"))
    assert bobs_replay.status_code == 200 and bobs_replay.json()["id"] == own_key.json()["id"]

    # alice's step order follows her own latest (3), not bob's (9)
    behind = alice.post(ckpt_url(session), ckpt(2, key="alice-2"))
    assert behind.status_code == 409 and "step 3" in behind.json()["detail"]
    assert alice.post(ckpt_url(session), ckpt(4, key="alice-4")).status_code == 201
    # and her key still means her body
    clash = alice.post(ckpt_url(session), ckpt(3, key="shared-key", by="someone else"))
    assert clash.status_code == 409 and list(clash.json()["errors"]) == ["idempotency_key"]

    assert steps(alice, session) == [(3, "alice"), (4, "alice")]
    assert steps(bob, session) == [(1, "bob"), (3, "bob"), (9, "bob")]
    with tenant_context(alice.tenant):
        assert Checkpoint.objects.filter(session_id=session).count() == 5


def test_a_teammates_save_during_an_outage_leaves_the_first_agents_copy_alone(
    alice: Caller, bob: Caller, session: str, settings
) -> None:  # type: ignore[no-untyped-def]
    """The stale-copy protection drops only the copy of the agent whose save missed Redis."""
    alice.post(ckpt_url(session), ckpt(1, by="alice"))
    bob.post(ckpt_url(session), ckpt(1, by="bob"))
    reachable = settings.REDIS_URL
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    assert bob.post(ckpt_url(session), ckpt(2, by="bob")).headers["Engram-Degraded"] == "redis-unavailable"
    settings.REDIS_URL = reachable

    mine = alice.get(ckpt_url(session, "/latest"))
    assert mine.headers["Engram-Source"] == "redis" and mine.json()["state"] == {"step": 1, "by": "alice"}
    bobs = bob.get(ckpt_url(session, "/latest"))
    assert bobs.headers["Engram-Source"] == "postgres" and bobs.json()["step_index"] == 2


def test_checkpoints_stay_apart_across_tenants(alice: Caller, mallory: Caller, session: str) -> None:
    alice.post(ckpt_url(session), ckpt(4, by="alice"))
    assert mallory.get(ckpt_url(session, "/latest")).status_code == 404
    assert steps(mallory, session) == []
    assert mallory.post(ckpt_url(session), ckpt(1, by="mallory")).status_code == 201
    assert alice.get(ckpt_url(session, "/latest")).json()["state"] == {"step": 4, "by": "alice"}
    assert mallory.get(ckpt_url(session, "/latest")).json()["state"] == {"step": 1, "by": "mallory"}


def test_checkpoint_admin_lists_each_agents_stream_and_opens_a_checkpoint(
    alice: Caller, bob: Caller, session: str
) -> None:
    alice.post(ckpt_url(session), ckpt(1, by="alice"))
    bob.post(ckpt_url(session), ckpt(1, by="bob"))
    with schema_context("public"):  # the requests left the connection in alpha, whose role reads no domains
        host = alice.tenant.domains.first().domain
    with tenant_context(alice.tenant):
        User = get_user_model()
        if not User.objects.filter(username="auditor").exists():
            User.objects.create_superuser("auditor", "auditor@example.com", "pw-123456789")
        bobs = Checkpoint.objects.get(session_id=session, agent=bob.agent)
    client = Client()
    client.post("/admin/login/", {"username": "auditor", "password": "pw-123456789"}, HTTP_HOST=host)

    listing = client.get("/admin/memory/checkpoint/", {"q": session}, HTTP_HOST=host)
    assert listing.status_code == 200 and "2 checkpoints" in listing.content.decode()
    only_bob = client.get(
        "/admin/memory/checkpoint/", {"q": session, "agent__id__exact": bob.agent.pk}, HTTP_HOST=host
    )
    assert only_bob.status_code == 200 and "1 checkpoint" in only_bob.content.decode()
    page = client.get(f"/admin/memory/checkpoint/{bobs.pk}/change/", HTTP_HOST=host)
    assert page.status_code == 200 and f"{session} step 1 (bob)" in page.content.decode()
