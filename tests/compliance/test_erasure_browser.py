"""Four-eyes erasure in a real browser: Playwright drives Debian's Chromium against uvicorn on the
test database, with a real Celery worker. One officer requests the erasure of a data subject and
cannot approve it herself; a second officer approves it; the first watches it run (the state polls
through htmx) and downloads the signed receipt, which verifies with the public key.

Screenshots are kept in ``var/test-artifacts/compliance/`` (git-ignored).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from django.contrib.auth.models import Group, User
from django.db import connection
from django_tenants.utils import tenant_context

from agents.services import agent_create
from compliance import signing, verify_receipt
from memory.episodic.models import Event
from memory.episodic.services import EventData, events_append
from tenants.models import Domain, Tenant
from tests.compliance.browser import SCREENS
from tests.compliance.test_console_browser import ARTIFACTS
from tests.factories import PASSWORD, asgi_server
from tests.memory.knowledge.test_review_queue_browser import CHROMIUM_ARGS, chromium_path  # noqa: F401

SUBJECT = "cust-browser-7"


@pytest.fixture
def erasure_site(scratch_tenant: Tenant, celery_worker) -> Iterator[str]:  # type: ignore[no-untyped-def]
    host = f"{scratch_tenant.schema_name.replace('_', '-')}.localhost"
    Domain.objects.create(domain=host, tenant=scratch_tenant, is_primary=True)
    with tenant_context(scratch_tenant):
        for name in ("olga", "pavel"):
            user = User.objects.create_user(name, f"{name}@example.com", PASSWORD, is_staff=True)
            user.groups.add(Group.objects.get(name="compliance officer"))
        from django.utils import timezone

        events_append(
            agent=agent_create(by=None, name="support-bot"),
            events=[
                EventData(
                    session_id="s-ticket",
                    kind="message",
                    content=f"Customer says: my phone is 555-01{i:02d}",
                    occurred_at=timezone.now(),
                    data_subject=SUBJECT,
                )
                for i in range(8)
            ],
        )
    connection.set_schema_to_public()
    with asgi_server(ENGRAM_SERVE_STATIC="1") as port:
        yield f"http://{host}:{port}"


def shot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def login(browser, base: str, username: str):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1366, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{base}/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    return page


def test_request_approve_watch_and_download_the_receipt_in_chromium(
    chromium_path: Path,  # noqa: F811 (the fixture imported above)
    erasure_site: str,
    scratch_tenant: Tenant,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_ARGS, headless=True)
        try:
            olga = login(browser, erasure_site, "olga")
            olga.goto(f"{erasure_site}/admin/compliance/erasurerequest/")
            olga.click("#erasure-new")
            olga.check("input[name=kind][value=subject]")
            olga.fill("#id_value", SUBJECT)
            olga.fill("#id_legal_basis", "GDPR Art. 17(1)(a)")
            olga.fill("#id_note", "ticket 4411")
            shot(olga, "erasure-1-request.png")
            olga.click("#erasure-submit")
            expect(olga.locator("#erasure-status")).to_have_text("Requested")
            expect(olga.locator("#erasure-waiting")).to_contain_text("second person")
            expect(olga.locator("#erasure-approve")).to_have_count(0)  # not her own
            state_url = olga.url
            erasure_id = re.search(r"[0-9a-f]{8}-[0-9a-f-]{27}", state_url).group()  # type: ignore[union-attr]
            shot(olga, "erasure-2-waiting.png")

            pavel = login(browser, erasure_site, "pavel")
            pavel.goto(state_url)
            pavel.wait_for_function("() => window.htmx !== undefined")
            asked: list[str] = []  # the approval asks first, naming what cannot be undone
            pavel.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
            pavel.click("#erasure-approve")
            assert asked and "cannot be undone" in asked[0] and SUBJECT in asked[0], asked
            expect(pavel.locator("#erasure-state")).to_contain_text("approved by user:pavel")
            shot(pavel, "erasure-3-approved.png")

            olga.reload()  # she watches it run: the state polls until it is done
            olga.wait_for_function("() => window.htmx !== undefined")
            expect(olga.locator("#erasure-status")).to_have_text("Done", timeout=90_000)
            expect(olga.locator("#erasure-counts")).to_contain_text("8 events redacted")
            shot(olga, "erasure-4-done.png")
            with olga.expect_download() as info:
                olga.click("#erasure-receipt")
            receipt_file = tmp_path / "receipt.json"
            info.value.save_as(str(receipt_file))
            expect(olga.locator("#erasure-verify-hint")).to_contain_text(f"--erasure-id {erasure_id}")
            with olga.expect_download() as key_info:
                olga.click("#erasure-public-key")
            key_file = tmp_path / "key.pem"
            key_info.value.save_as(str(key_file))
            olga.set_viewport_size({"width": 1366, "height": 768})
            olga.locator("#erasure-verify-hint").scroll_into_view_if_needed()
            SCREENS.mkdir(parents=True, exist_ok=True)
            olga.screenshot(path=str(SCREENS / "erasure-receipt-check.png"))
        finally:
            browser.close()

    # the documented offline check passes on what the officer downloaded
    checked = verify_receipt.verify(receipt_file.read_bytes(), key_file.read_bytes(), erasure_id=erasure_id)
    assert checked.ok, checked.failures
    assert any("approved by user:pavel" in line for line in checked.covers)
    download = json.loads(receipt_file.read_text())
    with tenant_context(scratch_tenant):
        public = load_pem_public_key(signing.public_key_pem())
        assert not Event.objects.filter(content__contains="555-01").exists()
        downloads = Event.objects.filter(payload_index__action="erasure_receipt_download", actor="user:olga")
        assert downloads.count() == 1
    public.verify(bytes.fromhex(download["signature"]), download["receipt"].encode())  # type: ignore[union-attr]
    receipt = json.loads(download["receipt"])
    assert receipt["stores"]["postgres"]["events_redacted"] == 8
    assert receipt["requested_by"] == "user:olga" and receipt["approved_by"] == "user:pavel"
    assert SUBJECT not in download["receipt"] and "555-01" not in download["receipt"]
