"""A Redis copy written after its checkpoint was deleted is refused, whoever wrote it and whoever
deleted it (real PostgreSQL and Redis; the steps interleaved by hand, in the order a race would).

The writers of the copy: a restore's re-warm (deferred until the answer is sent) and a save's
after-commit write. The deleters: a thread delete (the API's ``DELETE``), the checkpoints layer of
the lifecycle map (``Layer.remove``: retention and erasure alike, through ``checkpoints_erase``),
and a thread delete while Redis cannot be reached (its tombstone written at the next call that
reaches Redis). Each pair must leave no copy: the next restore reads PostgreSQL, which has none.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from django.db import transaction
from django_tenants.utils import tenant_context

from compliance.lifecycle.layers import layer_get
from core.redis import get_redis
from devstack import free_port
from memory.checkpoints import services
from memory.checkpoints.models import Checkpoint
from memory.working import services as working
from tenants.models import Tenant
from tests.factories import Caller


@pytest.fixture
def trio_tenants(committed_tenants: tuple[Tenant, Tenant]) -> tuple[Tenant, Tenant]:
    """The trio in committed tenants (a save really commits and its after-commit hook really writes Redis)."""
    return committed_tenants


@pytest.fixture
def session() -> str:
    return f"gone-{uuid.uuid4().hex[:12]}"


def url(session_id: str, suffix: str = "") -> str:
    return f"/api/v1/sessions/{session_id}/checkpoints{suffix}"


def body(step: int) -> dict[str, object]:
    return {"step_index": step, "idempotency_key": f"key-{step}", "state": {"who": "u-17"}, "plan": []}


def copy_key(caller: Caller, session_id: str) -> str:
    with tenant_context(caller.tenant):
        return services.cache_key(session_id, caller.agent.pk)


def thread_delete(caller: Caller, session_id: str) -> None:
    response = caller.client.delete(url(session_id))
    assert response.status_code == 200 and response.json()["checkpoints"] >= 1, response.content


def layer_remove(caller: Caller, session_id: str) -> None:
    """What a retention sweep or an erasure does to the stream's rows (the checkpoints layer)."""
    with tenant_context(caller.tenant):
        rows = list(Checkpoint.objects.filter(session_id=session_id).values("pk", "session_id"))
        removed = layer_get("checkpoints").remove(rows)
    assert len(removed.ids) == len(rows) >= 1


DELETERS: dict[str, Callable[[Caller, str], None]] = {"thread": thread_delete, "layer": layer_remove}


def saved_then_read_cold(caller: Caller, session_id: str) -> Callable[[], bool]:
    """Save step 1, drop its copy, restore it from PostgreSQL: the restore's deferred re-warm."""
    assert caller.post(url(session_id), body(1)).status_code == 201
    get_redis().delete(copy_key(caller, session_id))  # cold: the restore reads PostgreSQL
    with tenant_context(caller.tenant):
        cold = services.checkpoint_latest(
            agent=caller.agent,
            session_id=session_id,
            policy=caller.tenant.working_memory_policy,
            defer_rewarm=True,
        )
    assert cold.source == "postgres" and cold.rewarm is not None and cold.data()["step_index"] == 1  # type: ignore[index]
    return cold.rewarm


def assert_nothing_served(caller: Caller, session_id: str) -> None:
    assert not get_redis().exists(copy_key(caller, session_id)), "the deleted checkpoint was cached"
    restored = caller.get(url(session_id, "/latest"))
    assert restored.status_code == 404, restored.content
    assert restored.headers["Engram-Source"] == "postgres"


@pytest.mark.parametrize("deleter", DELETERS)
def test_a_rewarm_after_the_delete_does_not_cache_the_deleted_checkpoint(
    alice: Caller, session: str, deleter: str
) -> None:
    """restore reads PostgreSQL -> the delete commits and drops the copy -> the re-warm runs."""
    rewarm = saved_then_read_cold(alice, session)
    DELETERS[deleter](alice, session)
    rewarm()
    assert_nothing_served(alice, session)


@pytest.mark.parametrize("deleter", DELETERS)
def test_a_saves_copy_written_after_the_delete_is_refused(
    alice: Caller, session: str, deleter: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """save commits -> the delete commits and drops the copy -> the save's after-commit write runs."""
    deferred: list[Callable[[], None]] = []
    with monkeypatch.context() as patched:  # the save's after-commit write, held back
        patched.setattr(transaction, "on_commit", lambda func, *a, **k: deferred.append(func))
        with tenant_context(alice.tenant):
            saved = services.checkpoint_save(
                agent=alice.agent,
                session_id=session,
                step_index=1,
                idempotency_key="k1",
                state={"who": "u-17"},
                plan=[],
                policy=alice.tenant.working_memory_policy,
            )
    assert saved.replayed is False and len(deferred) == 1 and saved.cached is None
    DELETERS[deleter](alice, session)
    deferred[0]()
    assert_nothing_served(alice, session)


def test_a_save_after_the_delete_is_cached_again(alice: Caller, session: str) -> None:
    """The refusal is of what was deleted only: a checkpoint saved after the delete is cached."""
    assert alice.post(url(session), body(1)).status_code == 201
    thread_delete(alice, session)
    assert alice.post(url(session), body(1)).status_code == 201  # the stream starts again
    assert int(get_redis().hget(copy_key(alice, session), "step")) == 1  # type: ignore[arg-type]
    assert alice.get(url(session, "/latest")).headers["Engram-Source"] == "redis"
    get_redis().delete(copy_key(alice, session))  # a cold restore re-warms it too
    assert alice.get(url(session, "/latest")).headers["Engram-Source"] == "postgres"
    assert alice.get(url(session, "/latest")).headers["Engram-Source"] == "redis"


def test_a_delete_while_redis_is_unreachable_still_refuses_a_late_rewarm(
    alice: Caller,
    session: str,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    """The delete cannot reach Redis: this process's next call that does drops the copy and leaves
    the same refusal as a delete that reached it."""
    rewarm = saved_then_read_cold(alice, session)
    reachable = settings.REDIS_URL
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    thread_delete(alice, session)
    settings.REDIS_URL = reachable
    rewarm()  # reaches Redis: flushes what the delete left pending, then writes
    assert_nothing_served(alice, session)


def test_the_tombstone_is_bookkeeping_beside_the_copy(alice: Caller, session: str) -> None:
    """It shares the copy's hash tag (one slot), outlives it, holds only the deleted id, and an
    erasure's search of the tenant's keys for a person's id never takes it for data."""
    assert alice.post(url(session), body(1)).status_code == 201
    key = copy_key(alice, session)
    with tenant_context(alice.tenant):
        pk = Checkpoint.objects.get(session_id=session).pk
    thread_delete(alice, session)
    gone = services.cache.gone_key(key)
    assert gone.split("}")[0] == key.split("}")[0] and gone != key
    assert int(get_redis().get(gone)) == pk  # type: ignore[arg-type]
    assert get_redis().ttl(gone) >= alice.tenant.checkpoint_cache_ttl_seconds - 5
    with tenant_context(alice.tenant):
        assert gone in working.tenant_keys() and gone not in working.keys_holding([str(pk)])
