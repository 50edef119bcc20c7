"""The integrity panel and the flagged event in a real browser (issue 28, item 10): after a payload
was altered behind the trigger's back, the officer verifies now (a real worker runs the check),
and follows the finding from the panel to the event's page and to its row in the session's
timeline, each saying what was found and linking the check.
Screenshots go to ``var/test-artifacts/compliance/`` (git-ignored)."""

from __future__ import annotations

from pathlib import Path

from django.db import connection
from django_tenants.utils import tenant_context

from compliance.models import ChainCheck, CheckStatus
from memory.episodic.models import Event
from tests.compliance.conftest import behind_the_triggers
from tests.compliance.test_console_browser import Site, console_site, shot  # noqa: F401
from tests.factories import PASSWORD
from tests.memory.knowledge.test_review_queue_browser import CHROMIUM_ARGS, chromium_path  # noqa: F401


def test_an_officer_follows_a_finding_to_the_altered_event_in_chromium(
    chromium_path: Path,  # noqa: F811 (the fixture imported above)
    console_site: Site,  # noqa: F811
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with tenant_context(console_site.tenant):
        target = Event.objects.filter(session_id="s-audit").order_by("seq")[2]
        with behind_the_triggers() as cursor:
            cursor.execute(
                """UPDATE memory_event SET payload_json = '{"n":999}' WHERE seq = %s""", [target.seq]
            )
    connection.set_schema_to_public()

    base = console_site.base
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport={"width": 1366, "height": 900}).new_page()
            page.set_default_timeout(20_000)
            page.goto(f"{base}/admin/")
            page.fill("#id_username", "officer")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_function("() => window.htmx !== undefined")
            page.click("#verify-now")  # the worker runs the check; the panel polls it until it ends
            expect(page.locator("#integrity-title")).to_have_text("Trail BROKEN", timeout=60_000)
            expect(page.locator("#integrity-coverage")).to_contain_text("Last check: full, by user:officer")
            shot(page, "7-finding-in-panel.png")

            page.locator("#integrity-findings a", has_text=f"event #{target.seq}").click()
            warning = page.locator(".integrity-warning")
            expect(warning).to_be_visible()
            expect(warning).to_contain_text(f"event #{target.seq}: content or payload altered")
            shot(page, "8-flagged-event-page.png")

            page.goto(f"{base}/admin/sessions/?session=s-audit")
            row = page.locator(f"#event-{target.seq}")
            expect(row).to_have_class("tl-row is-flagged")
            expect(row.locator(".integrity-warning")).to_be_visible()
            check_link = row.locator(".integrity-warning a").get_attribute("href")
            expect(page.locator(f"#event-{target.seq - 1} .integrity-warning")).to_have_count(0)
            shot(page, "9-flagged-timeline-row.png")
        finally:
            browser.close()
    with tenant_context(console_site.tenant):
        check = ChainCheck.objects.get()
    assert check.status == CheckStatus.BROKEN and check.requested_by == "user:officer"
    assert check_link == f"/admin/compliance/chaincheck/{check.pk}/change/"
