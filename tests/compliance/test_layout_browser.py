"""Layout and messages in a real browser (Playwright drives Debian's Chromium against uvicorn on the
test database) at 1366x768: every list the tenant admin registers fits the window (no horizontal
scrolling of the page), with contradictions and legal holds in it; a refusal names the permission;
a retention rule's memory type is a choice and keeping data 0 days asks for confirmation.

Screenshots are kept in ``var/test-artifacts/screens/`` (git-ignored).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import connection
from django.urls import reverse
from django_tenants.utils import tenant_context

from agents.services import agent_create
from compliance import services
from tenants.models import Tenant
from tests.compliance.browser import chromium, login, people_create, shot, site_host
from tests.factories import PASSWORD, asgi_server, conflict_make
from tests.memory.knowledge.test_review_queue_browser import chromium_path  # noqa: F401


@dataclass
class Site:
    base: str
    lists: dict[str, str]  # "app.model" -> its changelist's path


@pytest.fixture
def layout_site(scratch_tenant: Tenant) -> Iterator[Site]:
    host = site_host(scratch_tenant)
    with tenant_context(scratch_tenant):
        User.objects.create_superuser("root", "root@example.com", PASSWORD)
        people_create(scratch_tenant, olga="compliance officer", pavel="compliance officer", nobody="")
        first, second = agent_create(by=None, name="intake-agent"), agent_create(by=None, name="review-agent")
        conflict_make(
            first, second, subject="Margarethe Vandenberghe-Oyelaran", old="Acme Holdings International"
        )
        conflict_make(first, second, subject="Dave", predicate="lives_in", old="Oslo", new="Rome")
        holds = [
            services.hold_place(
                kind="subject",
                value=f"customer-{n}-2f9c1e7a-5b3d-4c8e-9a1f-0d6b2e4c8a{n:02d}",
                reason="litigation hold for case 2026-CV-0481 (Vandenberghe v. Acme), counsel's letter of 3 March",
                username="olga",
            )
            for n in range(3)
        ]
        services.hold_release(hold=holds[0], username="olga", reason="case settled")
        lists = {
            f"{m._meta.app_label}.{m._meta.model_name}": reverse(
                f"admin:{m._meta.app_label}_{m._meta.model_name}_changelist"
            )
            for m in admin.site._registry
        }
    connection.set_schema_to_public()
    with asgi_server(ENGRAM_SERVE_STATIC="1") as port:
        try:
            yield Site(f"http://{host}:{port}", lists)
        finally:
            with tenant_context(scratch_tenant):  # the tenant's schema is dropped only without holds
                for hold in holds:
                    hold.refresh_from_db()
                    if hold.active and not hold.release_waiting:
                        services.hold_release(hold=hold, username="olga", reason="test over")
                    services.hold_release_confirm(hold=hold.pk, username="pavel")
            connection.set_schema_to_public()


# px past the window's right edge: the page's own, or the result table's inside its scrolling box
OVERFLOW = """() => Math.max(document.documentElement.scrollWidth - window.innerWidth,
    ...[...document.querySelectorAll('#changelist .results')].map(r => r.scrollWidth - r.clientWidth))"""


def test_every_list_fits_1366_px_and_messages_name_what_is_missing_in_chromium(
    chromium_path: Path,  # noqa: F811 (the fixture imported above)
    layout_site: Site,
) -> None:
    from playwright.sync_api import expect

    base = layout_site.base
    with chromium(chromium_path) as browser:
        page = login(browser, base, "root")  # sees every list
        wide = {}
        for name, path in sorted(layout_site.lists.items()):
            page.goto(f"{base}{path}")
            expect(page.locator("#changelist, #content-main").first).to_be_visible()
            overflow = page.evaluate(OVERFLOW)
            if overflow > 1:
                wide[name] = overflow
        page.goto(f"{base}/admin/memory/contradiction/")
        expect(page.locator("#result_list")).to_contain_text("Margarethe Vandenberghe-Oyelaran")
        shot(page, "contradictions-1366.png")
        page.goto(f"{base}/admin/compliance/legalhold/")
        expect(page.locator("#result_list")).to_contain_text("waiting for a second officer")
        shot(page, "legal-holds-1366.png")
        page.goto(f"{base}/admin/memory/fact/")
        shot(page, "facts-1366.png")
        assert not wide, f"lists wider than 1366 px (px past the edge): {wide}"

        # the retention rule: the memory type from a list, 0 days only once confirmed
        page.goto(f"{base}/admin/compliance/retentionrule/add/")
        page.select_option("#id_layer", "semantic")
        page.select_option("#id_memory_type", "observation")
        page.fill("#id_keep_days", "0")
        page.click("input[name=_save]")
        expect(page.locator(".errorlist")).to_contain_text("removes all of it at the next retention run")
        shot(page, "retention-zero-days.png")
        page.check("#id_confirm_zero")
        page.click("input[name=_save]")
        expect(page.locator("ul.messagelist")).to_contain_text("was added successfully")

        # a refusal of one of Django's own pages names the permission
        page = login(browser, base, "nobody")
        page.goto(f"{base}/admin/compliance/legalhold/")
        expect(page.locator("#content-main")).to_contain_text("compliance.view_legalhold")
        shot(page, "denied-names-permission.png")
