"""A tenant is seen by nobody else until its row, schema, role and grants are committed together
(issue 28, item 14): a beat sweep once failed with ``role "<db>_t_<new>" does not exist`` because it
listed a tenant whose row had committed while its migrations ran and before its role was made.

The race is made deterministic by looking from another connection at the moments tenant creation
is about to make the role and has just made it; and every place in the server that reads tenant
rows is walked, so a new sweep cannot list tenants except through the one selector.
"""

from __future__ import annotations

import ast
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection, connections
from rest_framework.exceptions import AuthenticationFailed

from agents.authentication import clear_tenant_cache, resolve_api_key
from agents.models import Agent
from core.tasks import for_each_tenant, tenant_schemas
from core.tenancy import current_schema, tenant_role
from memory.episodic.tasks import verify_chain
from tenants import roles
from tenants.models import Tenant
from tenants.services import tenant_create
from tests.factories import BASE_DIR


def look_from_another_connection(schema_name: str) -> dict[str, object]:
    """What a beat sweep and an API request see of tenant ``schema_name`` from a connection of their
    own (another thread) right now: whether the one selector lists it, what ``for_each_tenant``'s
    condition visited (it runs a query in each tenant's schema, as that tenant's role) or raised,
    and what resolving a key of that tenant raised."""
    seen: dict[str, object] = {}

    def look() -> None:
        try:
            seen["listed"] = schema_name in tenant_schemas()
            visited: list[str] = []

            def nothing_due() -> bool:
                Agent.objects.exists()  # the sweep's first query in the tenant's schema
                visited.append(current_schema())
                return False  # queue nothing

            try:
                for_each_tenant(verify_chain, when=nothing_due)
                seen["sweep"] = schema_name in visited
            except Exception as exc:
                seen["sweep"] = repr(exc)
            clear_tenant_cache()
            try:
                resolve_api_key(f"egm.{schema_name}.abcdefgh.secret")
                seen["key"] = "accepted"
            except AuthenticationFailed as exc:
                seen["key"] = str(exc.detail)
            except Exception as exc:
                seen["key"] = repr(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=look)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    return seen


UNSEEN = {"listed": False, "sweep": False, "key": "Invalid API key."}


@pytest.fixture
def new_slug(django_db_setup, django_db_blocker) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A slug for a tenant the test creates (committed); the tenant is dropped afterwards."""
    slug = f"vis_{uuid.uuid4().hex[:8]}"
    with django_db_blocker.unblock():
        try:
            yield slug
        finally:
            connection.set_schema_to_public()
            tenant = Tenant.objects.filter(schema_name=slug).first()
            if tenant is not None:
                tenant.delete(force_drop=True)


def test_a_tenant_is_invisible_to_sweeps_and_keys_until_its_role_and_grants_commit(
    new_slug: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the row had committed when the role was about to be made, so the sweep listed the
    tenant and its query failed with ``role ... does not exist`` (the key lookup too)."""
    moments: dict[str, dict[str, object]] = {}
    make_role = roles.tenant_role_ensure

    def make_role_watched(schema_name: str) -> str:
        moments["before the role"] = look_from_another_connection(schema_name)
        role = make_role(schema_name)
        moments["after the grants"] = look_from_another_connection(schema_name)
        return role

    monkeypatch.setattr(roles, "tenant_role_ensure", make_role_watched)
    _, created = tenant_create(slug=new_slug)

    assert created and set(moments) == {"before the role", "after the grants"}
    assert moments == {"before the role": UNSEEN, "after the grants": UNSEEN}
    # once committed, everyone sees the tenant, and its role works
    seen = look_from_another_connection(new_slug)
    assert seen == {"listed": True, "sweep": True, "key": "Invalid API key."}, seen
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [tenant_role(new_slug)])
        assert cursor.fetchone() == (1,)


def test_a_tenant_whose_creation_fails_leaves_nothing_behind(
    new_slug: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_role = roles.tenant_role_ensure

    def make_role_then_fail(schema_name: str) -> str:
        make_role(schema_name)
        raise RuntimeError("provisioning failed after the grants")

    monkeypatch.setattr(roles, "tenant_role_ensure", make_role_then_fail)
    with pytest.raises(RuntimeError, match="after the grants"):
        tenant_create(slug=new_slug)

    connection.set_schema_to_public()
    assert not Tenant.objects.filter(schema_name=new_slug).exists()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM pg_namespace WHERE nspname = %s), "
            "(SELECT count(*) FROM pg_roles WHERE rolname = %s)",
            [new_slug, tenant_role(new_slug)],
        )
        assert cursor.fetchone() == (0, 0)


# --- every place that reads tenant rows --------------------------------------------------------------

#: the server's packages (benchmarks are scripts that look up the one tenant they made)
SERVER_PACKAGES = ("config", "core", "api", "compliance", "tenants", "agents", "memory")

#: where tenant rows may be read, and why there
READERS = {
    ("core/tasks.py", "tenant_schemas"): "the one selector of the tenants periodic work runs for",
    ("tenants/selectors.py", "tenant_get"): "one tenant by schema name (keys, commands)",
    ("tenants/services.py", "tenant_create"): "provisioning: the tenant it creates",
    ("tenants/services.py", "public_tenant_ensure"): "provisioning: the public schema's row",
    ("tenants/services.py", "tenant_move_mark"): "a move to another server: its pause and its switch",
    ("tenants/roles.py", "_adopt"): "before migrations, as the login role: the schemas to hand over",
}


def tenant_reads(source: str) -> Iterator[tuple[int, str]]:
    """``(line, enclosing function)`` of each read of tenant rows in ``source``: the tenant model's
    manager (``Tenant.objects``, ``get_tenant_model().objects``, ``._default_manager``, also through
    a name bound to either) or SQL naming its table (``tenants_tenant``)."""
    tree = ast.parse(source)
    functions: list[tuple[int, int, str]] = [
        (node.lineno, node.end_lineno or node.lineno, node.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]

    def enclosing(line: int) -> str:
        inner = [(start, name) for start, end, name in functions if start <= line <= end]
        return max(inner)[1] if inner else "<module>"

    def is_model(node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in models
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name | ast.Attribute)
            and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) == "get_tenant_model"
        )

    models = {"Tenant"}
    for node in ast.walk(tree):  # names bound to the model: TenantModel = get_tenant_model()
        if isinstance(node, ast.Assign) and is_model(node.value):
            models |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("objects", "_default_manager"):
            if is_model(node.value):
                yield node.lineno, enclosing(node.lineno)
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and "tenants_tenant" in node.value
        ):
            yield node.lineno, enclosing(node.lineno)


def server_modules() -> Iterator[Path]:
    for package in SERVER_PACKAGES:
        for path in sorted((BASE_DIR / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def test_every_read_of_tenant_rows_goes_through_the_one_selector() -> None:
    """Periodic work lists tenants through ``core.tasks.tenant_schemas`` (``each_tenant``,
    ``for_each_tenant``, the consolidation metrics, ``migrate_schemas``' role sync), keys and
    commands find one through ``tenants.selectors.tenant_get``: nothing else reads tenant rows."""
    found = {
        (str(path.relative_to(BASE_DIR)), function, line)
        for path in server_modules()
        for line, function in tenant_reads(path.read_text())
    }
    stray = sorted(
        f"{path}:{line} ({function})" for path, function, line in found if (path, function) not in READERS
    )
    assert not stray, f"tenant rows read outside the selectors: {stray}"
    assert {(path, function) for path, function, _ in found} == set(READERS), "a reader listed here is gone"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n    return Tenant.objects.all()\n", [(2, "f")]),
        ("def g():\n    M = get_tenant_model()\n    return M.objects.filter(x=1)\n", [(3, "g")]),
        ("def h():\n    return get_tenant_model()._default_manager.count()\n", [(2, "h")]),
        ("SQL = 'SELECT schema_name FROM public.tenants_tenant'\n", [(1, "<module>")]),
        ("def k(tenant: Tenant):\n    return tenant.schema_name\n", []),
    ],
)
def test_the_walk_finds_each_kind_of_read(source: str, expected: list[tuple[int, str]]) -> None:
    assert list(tenant_reads(source)) == expected


def test_the_sweeps_list_tenants_through_the_selector(django_db_setup, django_db_blocker) -> None:  # type: ignore[no-untyped-def]
    """``for_each_tenant`` (every beat sweep, through ``each_tenant`` or itself) visits exactly the
    selector's tenants, in its order."""
    visited: list[str] = []

    def nothing_due() -> bool:
        visited.append(current_schema())
        return False

    with django_db_blocker.unblock():
        assert for_each_tenant(verify_chain, when=nothing_due) == 0
        assert visited == tenant_schemas() and {"alpha", "beta"} <= set(visited)
