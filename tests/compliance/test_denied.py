"""Refusals of Django's own admin views (a model's list, add, change, delete and history pages):
each names the permission the person lacks, and the server logs it as one line, not a traceback.
Walks every model the tenant admin registers, so a model added later is covered."""

from __future__ import annotations

import logging

import pytest
from django.contrib import admin
from django.urls import reverse
from django_tenants.utils import tenant_context

from tests.factories import Caller, admin_client


def _models() -> list[tuple[str, str]]:
    return sorted((m._meta.app_label, m._meta.model_name) for m in admin.site._registry)  # type: ignore[misc]


def test_every_admin_list_refused_names_its_permission_and_logs_one_line(
    alice: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    nobody = admin_client(alice.tenant, "nobody")  # staff, in no group
    with tenant_context(alice.tenant):
        urls = {f"{app}.{model}": reverse(f"admin:{app}_{model}_changelist") for app, model in _models()}
    assert len(urls) > 20
    for name, url in urls.items():
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="django.request"):
            response = nobody.get(url)
        assert response.status_code == 403, url
        app, model = name.split(".")
        assert f"{app}.view_{model}" in response.content.decode(), url
        records = [r for r in caplog.records if r.name == "django.request"]
        assert len(records) == 1, (url, [r.getMessage() for r in records])
        assert records[0].exc_info is None, f"{url}: the 403 is logged with a traceback"
        assert f"{app}.view_{model}" in records[0].getMessage()


def test_add_change_delete_and_history_name_theirs(alice: Caller, caplog: pytest.LogCaptureFixture) -> None:
    nobody = admin_client(alice.tenant, "nobody")
    group = "/admin/auth/group/"
    with tenant_context(alice.tenant):
        from django.contrib.auth.models import Group

        pk = Group.objects.get(name="operator").pk
    for url, permission in (
        (f"{group}add/", "auth.add_group"),
        (f"{group}{pk}/change/", "auth.change_group"),
        (f"{group}{pk}/delete/", "auth.delete_group"),
        (f"{group}{pk}/history/", "auth.view_group"),
    ):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="django.request"):
            response = nobody.get(url)
        assert response.status_code == 403 and permission in response.content.decode(), url
        assert [r.exc_info for r in caplog.records if r.name == "django.request"] == [None], url
