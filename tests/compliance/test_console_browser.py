"""A compliance officer's round in a real browser: Playwright drives Debian's Chromium against
uvicorn on the test database, with a real Celery worker. The officer opens the integrity panel,
runs "verify now", follows a session timeline from the event list (readable at 1366 px), opens a
decision's object, exports the session and downloads the archive, which verifies offline.

Screenshots are kept as test artefacts in ``var/test-artifacts/compliance/`` (git-ignored).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django_tenants.utils import tenant_context

from agents.services import agent_create
from compliance import verify_export
from memory.knowledge import services as knowledge
from memory.knowledge.services import FactData, FactObject
from tenants.models import Domain, Tenant
from tests.compliance.conftest import append
from tests.factories import BASE_DIR, PASSWORD, asgi_server
from tests.memory.knowledge.test_review_queue_browser import CHROMIUM_ARGS, chromium_path  # noqa: F401

ARTIFACTS = BASE_DIR / "var" / "test-artifacts" / "compliance"


@dataclass
class Site:
    tenant: Tenant
    base: str
    fact_id: int


@pytest.fixture
def console_site(scratch_tenant: Tenant, celery_worker) -> Iterator[Site]:  # type: ignore[no-untyped-def]
    host = f"{scratch_tenant.schema_name.replace('_', '-')}.localhost"
    Domain.objects.create(domain=host, tenant=scratch_tenant, is_primary=True)
    with tenant_context(scratch_tenant):
        officer = User.objects.create_user("officer", "officer@example.com", PASSWORD, is_staff=True)
        officer.groups.add(Group.objects.get(name="compliance officer"))
        planner, critic = agent_create(by=None, name="planner"), agent_create(by=None, name="critic")
        append(planner, 4, session_id="s-earlier")
        append(planner, 6, session_id="s-audit")
        fact = knowledge.fact_assert(
            agent=planner,
            data=FactData(
                subject="Ana", predicate="works_at", object=FactObject(entity="Acme"), session_id="s-audit"
            ),
        ).fact
        knowledge.fact_retract(agent=critic, fact_id=fact.pk, reason="stale badge", may_curate=True)
        append(planner, 3, session_id="s-later", start=50)
    connection.set_schema_to_public()
    with asgi_server(ENGRAM_SERVE_STATIC="1") as port:
        yield Site(scratch_tenant, f"http://{host}:{port}", fact.pk)


def shot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def test_a_compliance_officer_audits_a_session_in_chromium(
    chromium_path: Path,  # noqa: F811 (the fixture imported above)
    console_site: Site,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base = console_site.base
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1366, "height": 900}, accept_downloads=True)
            page = context.new_page()
            page.set_default_timeout(20_000)
            page.goto(f"{base}/admin/")
            page.fill("#id_username", "officer")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            expect(page.locator("#site-name")).to_contain_text("Engram")
            expect(page.locator("#integrity-panel")).to_contain_text("Trail not verified yet")
            page.wait_for_function("() => window.htmx !== undefined")
            shot(page, "1-status-panel.png")

            page.click("#verify-now")  # an htmx POST; the panel polls the check until it ends
            expect(page.locator("#integrity-summary")).to_contain_text("Chain intact up to #", timeout=60_000)
            expect(page.locator("#integrity-title")).to_have_text("Trail intact")
            shot(page, "2-verified.png")

            page.goto(f"{base}/admin/memory/event/")
            kinds = page.locator("#result_list td.field-kind")
            expect(kinds.first).to_be_visible()
            # at 1366 px every kind ("Message", "Decision", ...) stays on one line: no word broken
            lines = page.evaluate(
                """() => [...document.querySelectorAll('#result_list td.field-kind')].map(td => {
                    const range = document.createRange(); range.selectNodeContents(td);
                    return range.getClientRects().length; })"""
            )
            assert lines and set(lines) == {1}, lines
            # and the whole table fits: nothing hidden behind a horizontal scroll bar
            assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
            assert page.evaluate(
                "() => { const r = document.querySelector('.results'); return r.scrollWidth <= r.clientWidth + 1 }"
            ), "the event list needs a horizontal scroll bar at 1366 px"
            shot(page, "3-event-list-1366.png")

            page.locator("#result_list a", has_text="s-audit").first.click()
            expect(page.locator("h1")).to_contain_text("Session s-audit")
            decision = page.locator(".tl-row.is-decision").first
            expect(decision).to_contain_text("Retracted fact")
            expect(page.locator("#previous-session")).to_contain_text("s-earlier")
            expect(page.locator("#next-session")).to_contain_text("s-later")
            shot(page, "4-timeline.png")

            decision.locator("a.tl-object", has_text=f"fact #{console_site.fact_id}").click()
            expect(page.locator("#content")).to_contain_text("retracted", ignore_case=True)
            shot(page, "5-decision-object.png")
            page.go_back()

            page.click("#export-session")
            expect(page.locator("#id_session_id")).to_have_value("s-audit")
            page.click("#export-submit")
            expect(page.locator("#export-status")).to_have_text("done", timeout=60_000, ignore_case=True)
            shot(page, "6-export-done.png")
            with page.expect_download() as info:
                page.click("#export-download")
            archive = tmp_path / "session.tar"
            info.value.save_as(str(archive))
        finally:
            browser.close()

    report = verify_export.verify(str(archive))
    assert report.ok, report.failures
    assert any("events in scope" in note for note in report.notes)
