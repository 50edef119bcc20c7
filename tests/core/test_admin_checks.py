"""The system check that refuses an admin action without ``allowed_permissions`` (``core.checks``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib import admin
from django.contrib.admin import AdminSite
from django.core import checks
from django.db.models import QuerySet
from django.http import HttpRequest

from agents.models import Agent
from core.checks import ACTION_WITHOUT_PERMISSIONS, admin_action_permission_errors
from tenants.admin import public_admin_site


@pytest.fixture
def planted_site() -> Iterator[AdminSite]:
    """An admin site with one action that names no permission."""

    def shout(model_admin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        queryset.update(role="shouted")

    class PlantedAdmin(admin.ModelAdmin):
        actions = [shout]

    site = AdminSite(name="planted")
    site.register(Agent, PlantedAdmin)
    try:
        yield site
    finally:
        # the check walks every live AdminSite: leave this one empty for the tests that follow
        site.unregister(Agent)


def test_the_check_reports_an_action_without_allowed_permissions(planted_site: AdminSite) -> None:
    errors = admin_action_permission_errors([planted_site])
    assert [(e.id, e.obj.__name__) for e in errors] == [(ACTION_WITHOUT_PERMISSIONS, "PlantedAdmin")]
    assert "shout" in errors[0].msg
    # and it is registered: Django's own run of the admin checks reports it
    assert ACTION_WITHOUT_PERMISSIONS in {e.id for e in checks.run_checks(tags=[checks.Tags.admin])}


def test_the_check_is_clean_for_the_project() -> None:
    sites = [admin.site, public_admin_site]
    assert admin_action_permission_errors(sites) == []
    assert [
        e for e in checks.run_checks(tags=[checks.Tags.admin]) if e.id == ACTION_WITHOUT_PERMISSIONS
    ] == []
