"""A real browser resolves a contradiction in the review queue: Playwright drives Debian's Chromium
against uvicorn serving the test database.

Chromium comes from the system (``/usr/bin/chromium``, installed by ``.ci/run`` with apt-get), never
from ``playwright install``. In CI (``CI=true``) a missing Chromium or Playwright fails the test;
elsewhere it is skipped with the reason. Set ``ENGRAM_SCREENSHOTS=<dir>`` to keep screenshots of the
queue before and after the click.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django_tenants.utils import tenant_context

from agents.services import agent_create
from memory.episodic.models import Event, EventKind
from memory.knowledge.models import Contradiction, Fact, FactStatus
from tenants.models import Domain, Tenant
from tests.factories import PASSWORD, Dispute, asgi_server, conflict_make, unavailable

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def chromium_path() -> Path:
    """Debian's Chromium, and Playwright to drive it."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    if not (CHROMIUM.exists() and os.access(CHROMIUM, os.X_OK)):
        unavailable(f"Chromium not found at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    return CHROMIUM


@dataclass
class Site:
    """A tenant served by a real uvicorn at ``base`` (``http://<host>.localhost:<port>``)."""

    tenant: Tenant
    base: str
    disputes: list[Dispute]


@pytest.fixture
def live_site(scratch_tenant: Tenant) -> Iterator[Site]:
    """The scratch tenant with a domain, an operator, two open contradictions, and uvicorn serving it."""
    # schema names hold '_', which a host name may not: Django rejects such a Host header
    host = f"{scratch_tenant.schema_name.replace('_', '-')}.localhost"
    Domain.objects.create(domain=host, tenant=scratch_tenant, is_primary=True)
    with tenant_context(scratch_tenant):
        operator = User.objects.create_user("operator", "operator@example.com", PASSWORD, is_staff=True)
        operator.groups.add(Group.objects.get(name="operator"))  # made by the tenant's migrations
        alice, bob = agent_create(by=None, name="alice"), agent_create(by=None, name="bob")
        disputes = [
            conflict_make(alice, bob),
            conflict_make(alice, bob, subject="Dave", predicate="lives_in", old="Oslo", new="Rome"),
        ]
    connection.set_schema_to_public()

    # ENGRAM_SERVE_STATIC: the vendored htmx must load (config/asgi.py)
    with asgi_server(ENGRAM_SERVE_STATIC="1") as port:
        yield Site(scratch_tenant, f"http://{host}:{port}", disputes)


def _screenshot(page, name: str, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    folder = Path(os.environ.get("ENGRAM_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    page.screenshot(path=str(path), full_page=True)
    return path


def test_operator_resolves_a_contradiction_in_chromium(
    chromium_path: Path, live_site: Site, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    target, other = live_site.disputes
    cid = target.contradiction.pk
    note = f"confirmed with HR {uuid.uuid4().hex[:6]}"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1360, "height": 900})
            page.set_default_timeout(15_000)
            page.goto(f"{live_site.base}/admin/")
            page.fill("#id_username", "operator")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            expect(page.locator("#user-tools")).to_contain_text("operator")

            page.goto(f"{live_site.base}/admin/memory/contradiction/queue/")
            page.wait_for_function("() => window.htmx !== undefined")  # served from our static files
            expect(page.locator("#open-count")).to_have_text("2")
            row = page.locator(f"#contradiction-{cid}")
            expect(row).to_contain_text("Globex")
            expect(row).to_contain_text("Alice told me they joined Acme in March.")
            _screenshot(page, "review-queue.png", tmp_path)

            page.evaluate("() => { window.__sameDocument = true }")  # lost on a full page load
            row.locator("input[name=note]").fill(note)
            row.locator("button[data-resolution=accept_new]").click()

            expect(row).to_have_count(0)
            expect(page.locator("#open-count")).to_have_text("1")
            expect(page.locator("#queue-log")).to_contain_text("accepted the new fact")
            expect(page.locator(f"#contradiction-{other.contradiction.pk}")).to_have_count(1)
            assert page.evaluate("() => window.__sameDocument === true"), "the page was reloaded"
            _screenshot(page, "review-queue-after.png", tmp_path)
        finally:
            browser.close()

    with tenant_context(live_site.tenant):
        contradiction = Contradiction.objects.get(pk=cid)
        assert (contradiction.status, contradiction.resolution) == ("resolved", "accept_new")
        assert (contradiction.reviewer, contradiction.note) == ("operator", note)
        assert Fact.objects.get(pk=target.existing.pk).status == FactStatus.SUPERSEDED
        assert Fact.objects.get(pk=target.new.pk).status == FactStatus.ACTIVE
        assert Contradiction.objects.get(pk=other.contradiction.pk).status == "open"
        decision = Event.objects.filter(kind=EventKind.DECISION).latest("seq")
        assert decision.payload["contradiction_id"] == cid
        assert (decision.payload["resolution"], decision.payload["reviewer"]) == ("accept_new", "operator")
        assert decision.payload["note"] == note
