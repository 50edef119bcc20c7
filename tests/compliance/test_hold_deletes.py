"""A legal hold stops every hard delete, not only erasure and retention: the store's DELETE by any
agent allowed to delete, the checkpoints' DELETE by their owner or a curator, the store's TTL sweep.
Each path asks through one function (``core.holds.holds_check``, answered by the lifecycle's map);
the tests below walk every DELETE route of the API, every Celery task, every function that deletes
and every admin of a stored model, so a new one cannot skip the hold unnoticed."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import connection
from django.test import RequestFactory
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from django_tenants.utils import tenant_context

from agents.models import Scope
from compliance import lifecycle, services
from compliance.models import LegalHold, RetentionRule, RunStatus
from core.errors import Conflict
from memory.checkpoints.models import Checkpoint, CheckpointWrite
from memory.store.models import StoreItem
from memory.store.services import items_expire
from tenants.models import Tenant
from tests.factories import BASE_DIR, Caller, make_caller

SUBJECT = "cust-4711"
ITEMS = "/api/v1/store/items"


def put(caller: Caller, key: str, *, subject: str = SUBJECT, **extra: Any) -> None:
    response = caller.post(
        ITEMS,
        {"namespace": ["crm", "people"], "key": key, "value": {"n": key}, "index": False, **extra}
        | ({"data_subject": subject} if subject else {}),
    )
    assert response.status_code in (200, 201), response.content


def checkpoint(caller: Caller, session_id: str, *, subject: str = SUBJECT) -> None:
    body: dict[str, Any] = {"step_index": 1, "idempotency_key": "k1", "state": {"who": "Zoltan"}}
    if subject:
        body["data_subject"] = subject
    response = caller.post(f"/api/v1/sessions/{session_id}/checkpoints", body)
    assert response.status_code == 201, response.content
    writes = caller.post(
        f"/api/v1/sessions/{session_id}/checkpoints/writes",
        {
            "key": "k1",
            "task_id": "t1",
            "writes": [{"channel": "c", "value": {"type": "json", "data": "e30="}}],
        },
    )
    assert writes.status_code == 201, writes.content


def hold(tenant: Tenant, kind: str = "subject", value: str = SUBJECT) -> LegalHold:
    with tenant_context(tenant):
        return services.hold_place(
            kind=kind, value=value, reason="case 9/2026", username="olga", four_eyes=False
        )


def release(tenant: Tenant, placed: LegalHold) -> None:
    with tenant_context(tenant):
        services.hold_release(hold=placed, username="olga", reason="case closed")


def refused(response: Any, placed: LegalHold) -> None:
    assert response.status_code == 409, response.content
    assert f"legal hold #{placed.pk}" in response.json()["detail"], response.json()


def delete_item(caller: Caller, key: str) -> Any:
    return caller.client.delete(f"{ITEMS}?namespace=crm.people&key={key}")


def delete_checkpoints(caller: Caller, session_id: str, owner: str | None = None) -> Any:
    query = f"?agent={owner}" if owner else ""
    return caller.client.delete(f"/api/v1/sessions/{session_id}/checkpoints{query}")


# --- the store ------------------------------------------------------------------------------------------


def test_a_hold_stops_any_write_agent_deleting_a_held_store_item(alice: Caller, bob: Caller) -> None:
    put(alice, "address")
    placed = hold(alice.tenant)
    refused(delete_item(bob, "address"), placed)  # not its author
    refused(delete_item(alice, "address"), placed)  # its author
    with tenant_context(alice.tenant):
        assert StoreItem.objects.filter(key="address").exists()
    release(alice.tenant, placed)
    assert delete_item(bob, "address").json()["deleted"] is True


def test_a_hold_on_the_author_keeps_its_items(alice: Caller, bob: Caller) -> None:
    put(alice, "plain", subject="")
    placed = hold(alice.tenant, "agent", "alice")
    refused(delete_item(bob, "plain"), placed)
    release(alice.tenant, placed)
    assert delete_item(bob, "plain").json()["deleted"] is True


def test_the_store_is_shared_every_write_agent_deletes_and_a_reader_cannot(
    alice: Caller, bob: Caller, tenant_a: Tenant
) -> None:
    """The store's documented model (``memory.store.models``): tenant-wide like a blackboard; any
    agent with ``write`` puts and deletes any item (LangGraph's ``BaseStore`` has no owner), the
    item keeping who created and changed it; ``read`` alone deletes nothing."""
    put(alice, "shared", subject="")
    reader = make_caller(tenant_a, "reader", scopes=(Scope.READ,))
    assert delete_item(reader, "shared").status_code == 403
    answer = delete_item(bob, "shared")
    assert answer.status_code == 200 and answer.json()["deleted"] is True
    with tenant_context(alice.tenant):
        assert not StoreItem.objects.filter(key="shared").exists()


def test_the_ttl_sweep_keeps_held_items_until_the_hold_is_released(alice: Caller) -> None:
    put(alice, "held", ttl=1)
    put(alice, "other", subject="cust-1", ttl=1)
    placed = hold(alice.tenant)
    later = timezone.now() + timedelta(minutes=5)
    with tenant_context(alice.tenant):
        assert items_expire(now=later) == 1
        assert set(StoreItem.objects.values_list("key", flat=True)) == {"held"}
    release(alice.tenant, placed)
    with tenant_context(alice.tenant):
        assert items_expire(now=later) == 1
        assert not StoreItem.objects.exists()


def test_a_tenant_wide_hold_stops_the_sweep(alice: Caller) -> None:
    put(alice, "anyone", subject="", ttl=1)
    hold(alice.tenant, "tenant", "")
    with tenant_context(alice.tenant):
        assert items_expire(now=timezone.now() + timedelta(minutes=5)) == 0
        assert StoreItem.objects.filter(key="anyone").exists()


# --- checkpoints ----------------------------------------------------------------------------------------


def test_a_hold_stops_the_owner_and_a_curator_deleting_held_checkpoints(
    alice: Caller, tenant_a: Tenant
) -> None:
    checkpoint(alice, "s-held")
    curator = make_caller(tenant_a, "carol", scopes=(Scope.READ, Scope.WRITE, Scope.CURATE))
    placed = hold(alice.tenant)
    refused(delete_checkpoints(alice, "s-held"), placed)
    refused(delete_checkpoints(curator, "s-held", owner="alice"), placed)
    with tenant_context(alice.tenant):
        assert Checkpoint.objects.filter(session_id="s-held").count() == 1
        assert CheckpointWrite.objects.filter(session_id="s-held").count() == 1
    release(alice.tenant, placed)
    answer = delete_checkpoints(curator, "s-held", owner="alice")
    assert answer.status_code == 200 and answer.json()["checkpoints"] == 1


def test_a_hold_on_a_session_keeps_its_checkpoints(alice: Caller) -> None:
    checkpoint(alice, "s-court", subject="")
    placed = hold(alice.tenant, "session", "s-court")
    refused(delete_checkpoints(alice, "s-court"), placed)
    release(alice.tenant, placed)
    assert delete_checkpoints(alice, "s-court").json()["checkpoints"] == 1


# --- every path, enumerated --------------------------------------------------------------------------------

# A route's probe seeds held rows as ``alice`` (``bob``: another write agent, ``carol``: a curator),
# places a hold and returns (the DELETE to send, the hold it must name, a check that the rows stayed).
Probe = Callable[[Caller, Caller, Caller], tuple[Callable[[], Any], LegalHold, Callable[[], bool]]]


def _store_probe(alice: Caller, bob: Caller, carol: Caller) -> Any:
    put(alice, "probe")
    placed = hold(alice.tenant)

    def kept() -> bool:
        with tenant_context(alice.tenant):
            return StoreItem.objects.filter(key="probe").exists()

    return (lambda: delete_item(bob, "probe")), placed, kept


def _checkpoints_probe(alice: Caller, bob: Caller, carol: Caller) -> Any:
    checkpoint(alice, "s-probe")
    placed = hold(alice.tenant)

    def kept() -> bool:
        with tenant_context(alice.tenant):
            return Checkpoint.objects.filter(session_id="s-probe").exists()

    return (lambda: delete_checkpoints(carol, "s-probe", owner="alice")), placed, kept


# Every DELETE route of the API: a probe that shows the hold stops it, or why it deletes no row a
# hold keeps (a hold keeps PostgreSQL's rows; working memory is Redis's, expiring by its TTLs
# whatever anyone decides, and is outside every hold, as it is outside retention).
DELETE_ROUTES: dict[str, Probe | str] = {
    "store/items": _store_probe,
    "sessions/<str:session_id>/checkpoints": _checkpoints_probe,
    "memories/<str:memory_id>": "a forget: the row stays (hidden from recall, kept for audit)",
    "executions/<str:execution_id>/scratchpad": "working memory (Redis, TTL): outside holds",
    "executions/<str:execution_id>/scratchpad/<str:key>": "working memory (Redis, TTL): outside holds",
}


def _routes(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), getattr(pattern.callback, "view_class", None)


def test_every_delete_route_of_the_api_is_probed_or_deletes_no_held_row() -> None:
    found = {
        route.removeprefix("api/v1/")
        for route, view in _routes(get_resolver().url_patterns)
        if route.startswith("api/v1/") and view is not None and hasattr(view, "delete")
    }
    assert found == set(DELETE_ROUTES), "a DELETE route without a hold probe (or a reason): add it"


@pytest.mark.parametrize(
    "route", [r for r, probe in DELETE_ROUTES.items() if not isinstance(probe, str)], ids=str
)
def test_every_delete_route_that_removes_rows_is_refused_under_a_hold(
    route: str, alice: Caller, bob: Caller, tenant_a: Tenant
) -> None:
    probe = DELETE_ROUTES[route]
    assert not isinstance(probe, str)
    carol = make_caller(tenant_a, "carol", scopes=(Scope.READ, Scope.WRITE, Scope.CURATE))
    send, placed, kept = probe(alice, bob, carol)
    refused(send(), placed)
    assert kept()


def _task_store_sweep(tenant: Tenant) -> None:
    from memory.store.tasks import expire_items

    put_as = make_caller(tenant, "alice")
    put(put_as, "swept", ttl=1)
    with tenant_context(tenant):
        StoreItem.objects.filter(key="swept").update(expires_at=timezone.now() - timedelta(minutes=1))
        hold_ = services.hold_place(
            kind="subject", value=SUBJECT, reason="x", username="olga", four_eyes=False
        )
        expire_items.run()
        assert StoreItem.objects.filter(key="swept").exists()
        services.hold_release(hold=hold_, username="olga", reason="case closed")
        expire_items.run()
        assert not StoreItem.objects.filter(key="swept").exists()


def _task_retention(tenant: Tenant) -> None:
    from compliance.tasks import retention_daily

    put(make_caller(tenant, "alice"), "aged")
    with tenant_context(tenant):
        StoreItem.objects.filter(key="aged").update(updated_at=timezone.now() - timedelta(days=40))
        services.retention_rule_save(rule=RetentionRule(layer="store", keep_days=30), username="olga")
        services.hold_place(kind="subject", value=SUBJECT, reason="x", username="olga")
        assert retention_daily.run().get("store", 0) == 0
        assert StoreItem.objects.filter(key="aged").exists()


# Every Celery task of the project: a check that it keeps held rows, or why it needs none.
TASKS: dict[str, Callable[[Tenant], None] | str] = {
    "memory.store.tasks.expire_items": _task_store_sweep,
    "compliance.tasks.retention_daily": _task_retention,
    "compliance.tasks.retention_apply": "retention_run, as retention_daily (checked there)",
    "compliance.tasks.erasure_run": "refuses a held target (test_erasure: a hold refuses the erasure)",
    "agents.tasks.purge_expired_idempotency_keys": "replay copies past their TTL; no system of record",
    "memory.knowledge.tasks.outbox_purge_processed": "processed projection bookkeeping (ids only)",
    "memory.consolidation.tasks.summaries_rebuild": "derived summaries, rebuilt from the kept events",
    "memory.consolidation.tasks.consolidate": "archives and merges by forgetting: rows stay",
    "compliance.tasks.chain_check": "reads",
    "compliance.tasks.chain_check_nightly": "reads",
    "compliance.tasks.chain_check_scheduled": "reads (and drops its own routine intact checks after a week)",
    "compliance.tasks.anchor_head": "adds an anchor",
    "compliance.tasks.export_run": "writes an archive",
    "memory.episodic.tasks.verify_chain": "reads",
    "memory.semantic.tasks.embed_pending": "writes embeddings",
    "memory.semantic.tasks.pending_sweep": "queues embed_pending",
    "memory.semantic.tasks.touches_flush": "writes access clocks",
    "memory.semantic.tasks.touches_sweep": "queues touches_flush",
    "memory.knowledge.tasks.project_facts": "projects facts into Neo4j (from PostgreSQL)",
    "memory.knowledge.tasks.outbox_sweep": "queues outbox_drain",
    "core.tasks.each_tenant": "queues a task per tenant",
    "memory.conversations.tasks.extract": "writes memories and facts (an update supersedes: rows stay)",
}
PROJECT = ("agents", "api", "compliance", "config", "core", "memory", "tenants")


def test_every_task_is_checked_or_deletes_no_held_row() -> None:
    from config.celery import app

    app.loader.import_default_modules()
    found = {name for name in app.tasks if name.split(".")[0] in PROJECT}
    assert found == set(TASKS), "a task without a hold check (or a reason): add it"


@pytest.mark.parametrize("name", [n for n, check in TASKS.items() if not isinstance(check, str)], ids=str)
def test_every_task_that_removes_rows_keeps_held_ones(name: str, tenant_a: Tenant) -> None:
    check = TASKS[name]
    assert not isinstance(check, str)
    check(tenant_a)


# Every function of the project that deletes (an ORM or Redis ``.delete(...)``, a SQL ``DELETE``):
# "holds" when it asks ``core.holds.holds_check`` itself, else why it need not.
ERASE = "called by an erasure (refused by any hold meeting it) or retention (leaves held rows out)"
DELETERS: dict[str, str] = {
    "memory.store.services.item_delete": "holds",
    "memory.store.services.items_expire": "holds",
    "memory.checkpoints.services.delete.checkpoints_delete": "holds",
    "memory.store.services.items_erase": ERASE + ", or items_expire (asks)",
    "memory.store.services.item_put": "its own item's index row, replaced by the put",
    "memory.checkpoints.services.delete.checkpoints_erase": ERASE,
    "memory.semantic.services.erase.memories_erase": ERASE + ", or its own item's or summary's index row",
    "memory.knowledge.services.erase.facts_erase": ERASE,
    "memory.procedural.services.runs.skill_runs_erase": ERASE,
    "memory.consolidation.services.lifecycle.summaries_erase": ERASE + " (derived, rebuilt from kept events)",
    "memory.consolidation.services.lifecycle.summary_tree_rebuild": "derived summaries, rebuilt from kept events",
    "memory.consolidation.services.lifecycle.promotions_erase": ERASE,
    "memory.knowledge.projection.outbox_purge": "processed projection bookkeeping (ids only)",
    "memory.working.services.scratchpad_clear": "working memory (Redis): outside holds",
    "memory.working.services.execution_close": "working memory (Redis): outside holds",
    "memory.working.services.working_memory_erase": ERASE,
    "compliance.lifecycle.layers._memories_remove": ERASE,
    "compliance.lifecycle.layers._facts_remove": ERASE,
    "compliance.lifecycle.layers._checkpoints_remove": ERASE,
    "compliance.lifecycle.layers._summaries_remove": ERASE,
    "compliance.lifecycle.layers._skill_runs_remove": ERASE,
    "compliance.lifecycle.layers._store_items_remove": ERASE,
    "compliance.lifecycle.layers._extraction_jobs_remove": ERASE,
    "memory.conversations.services.jobs_erase": ERASE,
    "compliance.lifecycle.erasure.erase_entity_rows": ERASE,
    "compliance.lifecycle.erasure.erase_working_memory": ERASE,
    "agents.services.idempotency_records_purge": "replay copies past their TTL",
    "api.idempotency._keyed": "a replay copy past its TTL",
    "compliance.copies.celery_results_erase": "task results (Redis copies) naming an erased subject",
    "compliance.services.erasure._erase_copies": "the erasure (refused by any hold meeting its target)",
    "compliance.services.accounts.account_delete": "admin users and groups: no memory",
    "compliance.services.retention.retention_rule_delete": "a rule: no memory",
    "compliance.services.chain_checks.chain_check_scheduled": "routine intact chain checks a week old: no memory",
    "tenants.models.Tenant.delete": "holds",
    "tenants.admin.TenantAdmin.delete_queryset": "each tenant through Tenant.delete (asks)",
}
# what a function that deletes calls to ask the hold: the rows of a layer, or a whole tenant
ASKS = {"holds_check", "holds_refuse_tenant_delete"}


def _functions() -> Iterator[tuple[str, ast.FunctionDef]]:
    """Every module-level function and method of the project's packages, by dotted name."""
    for package in ("agents", "api", "compliance", "core", "memory", "tenants"):
        for path in sorted((BASE_DIR / package).rglob("*.py")):
            if "migrations" in path.parts or "management" in path.parts:
                continue
            module = ".".join(path.relative_to(BASE_DIR).with_suffix("").parts)
            tree = ast.parse(path.read_text())
            for top in tree.body:
                if isinstance(top, ast.FunctionDef):
                    yield f"{module}.{top.name}", top
                elif isinstance(top, ast.ClassDef):
                    for inner in top.body:
                        if isinstance(inner, ast.FunctionDef):
                            yield f"{module}.{top.name}.{inner.name}", inner


def _called(node: ast.AST) -> set[str]:
    return {
        n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute | ast.Name)
    }


def _deleters() -> dict[str, ast.FunctionDef]:
    """The functions that delete (an ORM or Redis ``.delete(...)``, a SQL ``DELETE``), and those
    calling a layer's erase function (``*_erase``, which deletes whatever it is given)."""
    functions = dict(_functions())
    direct = {
        name: node
        for name, node in functions.items()
        if any(
            (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "delete")
            or (isinstance(n, ast.Constant) and isinstance(n.value, str) and "DELETE FROM" in n.value)
            for n in ast.walk(node)
        )
    }
    erasers = {name.rpartition(".")[2] for name in direct if name.endswith("_erase")}
    return direct | {name: node for name, node in functions.items() if _called(node) & erasers}


def test_every_function_that_deletes_asks_the_hold_or_says_why_not() -> None:
    found = _deleters()
    assert set(found) == set(DELETERS), "a function that deletes, unclassified: add it"
    for name, reason in DELETERS.items():
        if reason != "holds":
            continue
        assert ASKS & _called(found[name]), f"{name} deletes without asking the hold"


def test_no_admin_deletes_a_row_of_a_store(tenant_a: Tenant) -> None:
    """Rows of the stores (``lifecycle.STORES``) leave by an erasure, retention or the agents' own
    deletes (each asking the hold); no admin page deletes one, not even for a superuser."""
    request = RequestFactory().get("/admin/")
    request.user = User(username="root", is_superuser=True, is_staff=True, is_active=True)
    stored = {model for store in lifecycle.STORES for model in store.models}
    with tenant_context(tenant_a):
        for model, model_admin in admin.site._registry.items():
            if model not in stored:
                continue
            assert not model_admin.has_delete_permission(request), f"the admin deletes {model.__name__}"
            actions = model_admin.get_actions(request)
            assert "delete_selected" not in actions, f"the admin bulk-deletes {model.__name__}"


def test_retention_asks_the_same_function(alice: Caller) -> None:
    """Retention leaves held rows out through ``lifecycle.unheld`` (the function ``holds_check`` answers
    with): one rule for what a hold keeps."""
    source = inspect.getsource(lifecycle.retention_candidates)
    assert "unheld(" in source
    put(alice, "kept")
    with tenant_context(alice.tenant):
        StoreItem.objects.filter(key="kept").update(updated_at=timezone.now() - timedelta(days=40))
        services.retention_rule_save(rule=RetentionRule(layer="store", keep_days=30), username="olga")
        services.hold_place(kind="subject", value=SUBJECT, reason="x", username="olga")
        run = services.retention_run(run_id=services.retention_run_start(requested_by="job:retention").pk)
        assert run.status == RunStatus.DONE and StoreItem.objects.filter(key="kept").exists()


# --- the tenant -----------------------------------------------------------------------------------------


def test_a_hold_stops_the_platform_admin_deleting_the_tenant(
    scratch_tenant: Tenant, django_db_blocker
) -> None:  # type: ignore[no-untyped-def]
    """Deleting a tenant drops its schema (or strands it without a role): every row a hold keeps.
    The platform admin's delete, one tenant or a selection, is refused while a hold is active."""
    from tenants.admin import TenantAdmin

    with django_db_blocker.unblock():
        placed = hold(scratch_tenant, "tenant", "")
        connection.set_schema_to_public()
        request = RequestFactory().post("/admin/")
        request.user = User(username="root", is_superuser=True, is_staff=True, is_active=True)
        model_admin = TenantAdmin(Tenant, admin.site)
        with pytest.raises(Conflict, match=f"legal hold #{placed.pk}"):
            scratch_tenant.delete(force_drop=True)
        assert not model_admin.has_delete_permission(request, scratch_tenant)  # no button, no selection
        with pytest.raises(Conflict, match=f"legal hold #{placed.pk}"):
            model_admin.delete_model(request, scratch_tenant)
        with pytest.raises(Conflict, match=f"legal hold #{placed.pk}"):
            model_admin.delete_queryset(request, Tenant.objects.filter(pk=scratch_tenant.pk))
        assert Tenant.objects.filter(pk=scratch_tenant.pk).exists()
        with tenant_context(scratch_tenant):
            assert LegalHold.objects.filter(pk=placed.pk, released_at__isnull=True).exists()
        release(scratch_tenant, placed)
        connection.set_schema_to_public()
        assert model_admin.has_delete_permission(request, scratch_tenant)
    # released, the fixture's own delete (force_drop) goes through
