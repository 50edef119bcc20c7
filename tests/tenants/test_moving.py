"""A tenant being moved to another PostgreSQL server (decision 0071) answers 503 with Retry-After,
through its key and through its host; another tenant is not affected."""

from __future__ import annotations

from django.test import Client

from tenants.models import Tenant
from tests.factories import make_caller


def test_a_moving_tenant_answers_503_and_another_does_not(tenant_a: Tenant, tenant_b: Tenant) -> None:
    mover, other = make_caller(tenant_a, "mover"), make_caller(tenant_b, "other")
    Tenant.objects.filter(pk=tenant_a.pk).update(moving=True)

    answer = mover.get("/api/v1/me")
    assert answer.status_code == 503, answer.content
    assert answer["Retry-After"] == "10"
    assert answer.json()["code"] == "unavailable"
    assert other.get("/api/v1/me").status_code == 200

    page = Client(HTTP_HOST="alpha.localhost").get("/admin/login/")
    assert page.status_code == 503 and page["Retry-After"] == "10"
    assert Client(HTTP_HOST="beta.localhost").get("/admin/login/").status_code == 200
