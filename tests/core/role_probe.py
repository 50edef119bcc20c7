"""Probes for the tenant-role proof (tests/core/test_tenant_roles.py): what a unit of work of one
tenant gets when it runs raw SQL naming another tenant's schema, from an API view, an admin view, a
task (role_probe_tasks.py) and across a real server's connection pool.

``urlpatterns`` (the probes, then the tenant URLs) serve as ``ROOT_URLCONF`` and
``PUBLIC_SCHEMA_URLCONF`` in the tests and in ``role_probe_settings``; ``role_probe_asgi`` serves
them with one more probe for a real server.
"""

from __future__ import annotations

from django.contrib import admin
from django.db import DatabaseError, connection, transaction
from django.http import HttpRequest, JsonResponse
from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response

from api.views import ApiView
from config.urls import urlpatterns as tenant_urlpatterns
from core.tenancy import quote_ident, tenant_role

OTHER = "other"


def probe_sql(other_schema: str) -> dict[str, object]:
    """The role and search path the current unit of work runs with, the row count of its own
    semantic memories, and the SQLSTATE (``"42501"``: insufficient_privilege) of counting those of
    ``other_schema`` by name (``"ok"`` if that worked)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, session_user, current_setting('search_path'), pg_backend_pid(), "
            "(SELECT count(*) FROM memory_semanticmemory)"
        )
        role, login, search_path, pid, own = cursor.fetchone()
    read_other = f'SELECT count(*) FROM "{other_schema}".memory_semanticmemory'
    return {
        "role": role,
        "login": login,
        "search_path": search_path,
        "pid": pid,
        "own_memories": own,
        "other_schema": attempt(read_other),
        # raw SQL that asks for the other tenant's role first (rolled back either way)
        "set_role_other": attempt(f"SET LOCAL ROLE {quote_ident(tenant_role(other_schema))}", read_other),
    }


def attempt(*statements: str) -> str:
    """Run ``statements`` in a transaction rolled back at the end: ``"ok"``, or the SQLSTATE of the
    first that failed (``"42501"``: insufficient_privilege)."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
            transaction.set_rollback(True)
    except DatabaseError as exc:
        return getattr(exc.__cause__, "sqlstate", None) or repr(exc)
    return "ok"


class ProbeView(ApiView):
    """``GET /probe/sql?other=<schema>`` with an agent's key: ``probe_sql`` inside its request."""

    get_query_params = frozenset({OTHER})

    def get(self, request: Request) -> Response:
        return Response(probe_sql(request.query_params[OTHER]))


class FailingView(ApiView):
    """``GET /probe/fail`` with an agent's key: a unit of work that dies half-way through a
    transaction it leaves open and aborted (a 500)."""

    def get(self, request: Request) -> Response:
        connection.set_autocommit(False)
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM memory_semanticmemory")
            cursor.execute("SELECT 1 / 0")
        raise AssertionError("unreachable")


def admin_probe(request: HttpRequest) -> JsonResponse:
    """``/probe/admin/?other=<schema>`` behind the tenant admin's login: ``probe_sql`` there."""
    return JsonResponse(probe_sql(request.GET[OTHER]))


urlpatterns = [
    path("probe/sql", ProbeView.as_view()),
    path("probe/fail", FailingView.as_view()),
    path("probe/admin/", admin.site.admin_view(admin_probe)),
    *tenant_urlpatterns,
]
