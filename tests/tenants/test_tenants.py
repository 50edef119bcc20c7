"""Tenant provisioning."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection

from tenants.models import Tenant


def test_create_tenant_command_is_idempotent(django_db_setup, django_db_blocker) -> None:  # type: ignore[no-untyped-def]
    with django_db_blocker.unblock():
        try:
            out = io.StringIO()
            call_command("create_tenant", "gamma", "--domain", "gamma.localhost", stdout=out)
            call_command("create_tenant", "gamma", "--domain", "gamma.localhost", stdout=out)
            assert out.getvalue().splitlines() == ["tenant gamma: created", "tenant gamma: already exists"]
            tenant = Tenant.objects.get(schema_name="gamma")
            assert list(tenant.domains.values_list("domain", flat=True)) == ["gamma.localhost"]
            assert tenant.retrieval_policy.near_duplicate_threshold == 0.97
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
                )
                assert cursor.fetchone() == ("public",)
        finally:
            connection.set_schema_to_public()
            Tenant.objects.filter(schema_name="gamma").first().delete(force_drop=True)


@pytest.mark.parametrize("slug", ["public", "Bad-Slug", "1abc", ""])
def test_bad_tenant_slugs_are_refused(db, slug: str) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("create_tenant", slug, stdout=io.StringIO())
