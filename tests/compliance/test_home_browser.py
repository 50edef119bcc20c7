"""The admin home page per role in a real browser (Playwright drives Debian's Chromium against
uvicorn on the test database): "Waiting for you" lists what this person may act on, with counts and
links, and nothing they may not. Two compliance officers (one asked for an erasure and a hold's
release, the other is the second officer both wait for; a hold nearing its review date, moved on
its page), an operator (an open contradiction, an
agent's skill proposal) and a staff user in no group.

Screenshots at 1366x768 are kept in ``var/test-artifacts/screens/`` (git-ignored), one per role.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone
from django_tenants.utils import tenant_context

from agents.services import agent_create
from compliance import services
from compliance.models import LegalHold
from tenants.models import Tenant
from tests.compliance.browser import chromium, login, people_create, shot, site_host
from tests.factories import (
    asgi_server,
    conflict_make,
    make_caller,
    requires_model,
    skill_seed,
)
from tests.memory.knowledge.test_review_queue_browser import chromium_path  # noqa: F401

pytestmark = requires_model  # the agent's skill proposal is embedded for matching


@dataclass
class Site:
    base: str
    erasure_id: str
    hold_id: int


@pytest.fixture
def home_site(scratch_tenant: Tenant) -> Iterator[Site]:
    host = site_host(scratch_tenant)
    skill_seed(make_caller(scratch_tenant, "support-bot"))  # an agent's proposal: a draft v1
    with tenant_context(scratch_tenant):
        people_create(
            scratch_tenant, olga="compliance officer", pavel="compliance officer", oscar="operator", nobody=""
        )
        conflict_make(agent_create(by=None, name="alice"), agent_create(by=None, name="bob"))
        erasure = services.erasure_request(
            kind="subject", value="cust-gone-3", legal_basis="GDPR Art. 17(1)(a)", note="", username="olga"
        )
        hold = services.hold_place(kind="subject", value="cust-held-9", reason="litigation", username="olga")
        services.hold_release(hold=hold, username="olga", reason="case closed")
        services.hold_place(
            kind="session",
            value="s-audit-4",
            reason="regulator's inquiry",
            username="olga",
            four_eyes=False,
            review_by=timezone.now().date() + timedelta(days=5),
        )
    connection.set_schema_to_public()
    with asgi_server(ENGRAM_SERVE_STATIC="1") as port:
        yield Site(f"http://{host}:{port}", str(erasure.pk), hold.pk)
    with tenant_context(scratch_tenant):  # an active hold refuses the tenant's deletion
        for active in LegalHold.objects.filter(released_at__isnull=True):
            services.hold_release(hold=active, username="olga", reason="test over")
    connection.set_schema_to_public()


def _sections(page) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Each shown section's key and its count as the page says it."""
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#waiting-for-you .wf-section')]
            .map(s => [s.id.replace('waiting-', ''), s.querySelector('.wf-total').textContent.trim()]))"""
    )


def test_the_home_page_lists_what_waits_for_each_role_in_chromium(
    chromium_path: Path,  # noqa: F811 (the fixture imported above)
    home_site: Site,
) -> None:
    from playwright.sync_api import expect

    base = home_site.base
    with chromium(chromium_path) as browser:
        # the second officer: olga's erasure and olga's hold release wait for him
        page = login(browser, base, "pavel")
        expect(page.locator("#waiting-title")).to_contain_text("Waiting for you")
        assert _sections(page) == {"erasures": "1", "holds": "1", "reviews": "1", "checks": "1"}
        expect(page.locator("#waiting-reviews")).to_contain_text("s-audit-4: review by")
        expect(page.locator("#waiting-checks")).to_contain_text("Scheduled chain checks overdue")
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
        # "Recent actions" beside the apps at 1366 px, not below them
        main, recent = (
            page.locator(sel).bounding_box() for sel in ("#content-main", "#recent-actions-module")
        )
        assert main and recent and recent["x"] >= main["x"] + main["width"] - 1, (main, recent)
        assert recent["y"] < main["y"] + 100, (main, recent)
        shot(page, "home-second-officer.png")
        page.locator("#waiting-erasures li a", has_text="cust-gone-3").click()
        expect(page).to_have_url(re.compile(f"/admin/compliance/erasurerequest/{home_site.erasure_id}/"))
        expect(page.locator("#content")).to_contain_text("GDPR Art. 17(1)(a)")
        page.go_back()
        page.locator("#waiting-holds li a").first.click()
        expect(page).to_have_url(f"{base}/admin/compliance/legalhold/{home_site.hold_id}/release/")
        page.once("dialog", lambda dialog: dialog.accept())  # "Release legal hold #1 ...?"
        page.click("#hold-confirm")  # the second officer confirms: the list empties
        page.goto(f"{base}/admin/")
        assert _sections(page)["holds"] == "none"
        # the hold nearing review: its page moves the date, and it leaves the list
        page.locator("#waiting-reviews li a", has_text="s-audit-4").click()
        expect(page.locator("#id_review_by")).to_be_visible()
        page.locator("#id_review_by").scroll_into_view_if_needed()
        shot(page, "hold-review-date.png")
        page.fill("#id_review_by", (timezone.now().date() + timedelta(days=60)).isoformat())
        page.click("input[name=_save]")
        expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
        page.goto(f"{base}/admin/")
        assert _sections(page)["reviews"] == "none"

        # the officer who asked waits for nobody: her own requests are not hers to decide
        page = login(browser, base, "olga")
        assert _sections(page) == {"erasures": "none", "holds": "none", "reviews": "none", "checks": "1"}
        shot(page, "home-requesting-officer.png")

        # the operator: the review queue and the agent's proposal, nothing of compliance
        page = login(browser, base, "oscar")
        assert _sections(page) == {"contradictions": "1", "proposals": "1"}
        expect(page.locator("#waiting-contradictions")).to_contain_text("Alice works_at Acme or Globex?")
        shot(page, "home-operator.png")
        page.locator("#waiting-proposals li a", has_text="reset-password v1").click()
        expect(page.locator("h1")).to_contain_text("reset-password")
        page.go_back()
        page.locator("#waiting-contradictions h3 a").click()
        expect(page.locator("#content")).to_contain_text("Globex")

        # no group, no permission: no list at all
        page = login(browser, base, "nobody")
        expect(page.locator("#site-name")).to_be_visible()
        assert page.locator("#waiting-for-you").count() == 0
        shot(page, "home-no-group.png")
