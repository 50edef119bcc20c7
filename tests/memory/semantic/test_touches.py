"""Recall restarts the clocks of the memories it returns through a Redis buffer applied by the worker:
within a bounded delay, by a real worker; nothing acknowledged is lost when a flush dies; a burst of
recalls counts as that many accesses; one tenant's flush never applies another's; with Redis down the
clock restarts at once in PostgreSQL."""

from __future__ import annotations

import math
import time
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_tenants.utils import tenant_context

from core.redis import get_redis, tenant_key
from devstack import free_port
from memory.semantic import touches
from memory.semantic.forgetting import stability_after_recalls
from memory.semantic.models import MemoryAccess
from memory.semantic.services.clocks import accesses_flush
from tenants.models import Tenant
from tests.factories import Caller, make_caller, remember, requires_model, search

# seconds: the flush delay, plus the worker picking the task up on two busy cores
SLACK = 30


def _age(memory_id: Any, *, days: float) -> None:
    MemoryAccess.objects.filter(pk=memory_id).update(last_accessed_at=timezone.now() - timedelta(days=days))


def _clear_buffer() -> None:
    get_redis().delete(tenant_key("semantic", "touches"), tenant_key("semantic", "touches", "scheduled"))


def _hold_flushes() -> None:
    """Mark a flush as already scheduled for the current tenant for ten minutes, so the recalls of
    the test queue none: the test's own flushes are then the only ones that read its buffer (the
    session's worker would otherwise run a queued flush at any time during the test)."""
    get_redis().set(tenant_key("semantic", "touches", "scheduled"), "1", px=600_000)


@requires_model
def test_a_real_worker_restarts_recalled_clocks_within_the_bound(
    celery_worker: object, scratch_tenant: Tenant
) -> None:
    caller = make_caller(scratch_tenant, "reader")
    recalled = remember(caller, "The fire drill is on the first Monday of the month.").json()["id"]
    other = remember(caller, "Parking permits are renewed every January.").json()["id"]
    with tenant_context(scratch_tenant):
        _age(recalled, days=5)
        _age(other, days=5)
    asked = timezone.now()
    hits = search(caller, "when is the fire drill", k=1)
    assert [h["memory"]["id"] for h in hits] == [recalled]
    assert hits[0]["memory"]["access_count"] == 1  # the hit shows its access at once

    start = time.monotonic()
    bound = settings.ENGRAM_TOUCH_FLUSH_SECONDS + SLACK
    while True:
        with tenant_context(scratch_tenant):
            access = MemoryAccess.objects.get(pk=recalled)
        if access.access_count == 1:
            break
        assert time.monotonic() - start < bound, f"the clock did not restart within {bound} s"
        time.sleep(0.2)
    print(f"clock restarted {time.monotonic() - start:.2f} s after the recall")
    assert access.last_accessed_at >= asked - timedelta(seconds=1)
    # five days without access at S = 168 h: p = exp(-120/168), S grows by g (1 - p) with g = 2
    assert access.stability_hours == pytest.approx(168 * (1 + 2 * (1 - math.exp(-120 / 168))), rel=1e-3)
    with tenant_context(scratch_tenant):
        untouched = MemoryAccess.objects.get(pk=other)
        assert untouched.access_count == 0  # not returned, not touched
        assert not touches.touches_waiting()  # applied and acknowledged


@requires_model
def test_a_flush_that_dies_before_committing_loses_nothing(scratch_tenant: Tenant) -> None:
    """In a committed tenant of its own, with no flush queued: only the test reads its buffer."""
    caller = make_caller(scratch_tenant, "keys")
    memory_id = remember(caller, "The server room key is kept by Olga.").json()["id"]
    with tenant_context(scratch_tenant):
        _clear_buffer()
        _hold_flushes()
        _age(memory_id, days=2)
    search(caller, "who keeps the server room key", k=1)
    with tenant_context(scratch_tenant):
        # a flush reads the entry and dies before its commit (and so before acknowledging it)
        with pytest.raises(RuntimeError), transaction.atomic():
            read = touches.touches_read(count=100)
            assert [t.ids for t in read] == [(memory_id,)]
            MemoryAccess.objects.filter(pk=memory_id).update(access_count=99)  # rolled back with it
            raise RuntimeError("worker killed")
        assert MemoryAccess.objects.get(pk=memory_id).access_count == 0
        assert touches.touches_waiting()  # still there, pending
        assert accesses_flush() == 1  # the next flush reads the pending entry first
        assert MemoryAccess.objects.get(pk=memory_id).access_count == 1
        assert accesses_flush() == 0 and not touches.touches_waiting()


@requires_model
def test_a_burst_of_recalls_counts_every_access(scratch_tenant: Tenant) -> None:
    """In a committed tenant of its own: the session's worker (started by the first test here)
    runs the flushes other tests queued, and may run the one this burst queues before the test's
    own; a flush that runs in a test's uncommitted tenant skips rows it cannot see. Whoever flushes,
    the four recalls count four accesses."""
    caller = make_caller(scratch_tenant, "burst")
    memory_id = remember(caller, "The cafeteria serves curry on Thursdays.").json()["id"]
    with tenant_context(scratch_tenant):
        _age(memory_id, days=3)
    for _ in range(4):
        assert (
            search(caller, "what does the cafeteria serve on Thursdays", k=1)[0]["memory"]["id"] == memory_id
        )
    with tenant_context(scratch_tenant):
        assert 0 <= accesses_flush() <= 4  # a worker's flush holds the lock this one waits for
        access = MemoryAccess.objects.get(pk=memory_id)
    assert access.access_count == 4
    assert timezone.now() - access.last_accessed_at < timedelta(minutes=1)
    assert access.stability_hours == pytest.approx(stability_after_recalls(168.0, 72.0, 2.0, 4), rel=1e-3)


@requires_model
def test_a_tenants_flush_never_applies_another_tenants_recalls(two_tenants: tuple[Caller, Caller]) -> None:
    """In two committed tenants of their own, with no flush queued: only the test reads their buffers."""
    alice, mallory = two_tenants
    memory_id = remember(alice, "The alpha team stand-up is at nine.").json()["id"]
    for caller in (alice, mallory):
        with tenant_context(caller.tenant):
            _clear_buffer()
            _hold_flushes()
    search(alice, "when is the stand-up", k=1)
    with tenant_context(mallory.tenant):
        assert accesses_flush() == 0
    with tenant_context(alice.tenant):
        assert MemoryAccess.objects.get(pk=memory_id).access_count == 0
        assert accesses_flush() == 1
        assert MemoryAccess.objects.get(pk=memory_id).access_count == 1


@requires_model
def test_with_redis_down_a_recall_restarts_the_clock_at_once(alice: Caller, settings) -> None:  # type: ignore[no-untyped-def]
    memory_id = remember(alice, "Visitors sign in at the east desk.").json()["id"]
    with tenant_context(alice.tenant):
        _age(memory_id, days=1)
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    hits = search(alice, "where do visitors sign in", k=1)
    assert hits[0]["memory"]["id"] == memory_id and hits[0]["memory"]["access_count"] == 1
    with tenant_context(alice.tenant):
        assert MemoryAccess.objects.get(pk=memory_id).access_count == 1
