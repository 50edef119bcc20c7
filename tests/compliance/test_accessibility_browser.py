"""Accessibility of the console's main pages: axe-core (``tests/fixtures/axe``, vendored) run in
Debian's Chromium through Playwright against uvicorn on the test database, at 1366x768, on the home
page, a session timeline, the contradiction queue, the skill editor and the erasure pages (the
request form and a request's page), the legal holds list and a hold's page. Zero critical and zero serious violations."""

from __future__ import annotations

import hashlib
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
from memory.procedural.models import Skill
from tenants.models import Tenant
from tests.compliance.browser import chromium, login, people_create, site_host
from tests.factories import (
    BASE_DIR,
    asgi_server,
    conflict_make,
    make_caller,
    requires_model,
    skill_seed,
)
from tests.memory.knowledge.test_review_queue_browser import chromium_path  # noqa: F401

pytestmark = requires_model  # the skill under edit is an agent's proposal, embedded for matching

AXE = BASE_DIR / "tests" / "fixtures" / "axe" / "axe.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"  # axe-core 4.14.1
BLOCKING = {"critical", "serious"}

VIOLATIONS = """async () => (await axe.run(document, {resultTypes: ['violations']})).violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ': ' + (n.failureSummary || '').split('\\n')[1])
}))"""


@dataclass
class Site:
    base: str
    skill_id: int
    erasure_id: str
    hold_id: int


@pytest.fixture
def a11y_site(scratch_tenant: Tenant) -> Iterator[Site]:
    host = site_host(scratch_tenant)
    skill_seed(make_caller(scratch_tenant, "support-bot"))
    with tenant_context(scratch_tenant):
        people_create(scratch_tenant, olga="compliance officer", pavel="compliance officer", oscar="operator")
        conflict_make(agent_create(by=None, name="alice"), agent_create(by=None, name="bob"))
        erasure = services.erasure_request(
            kind="subject", value="cust-a11y-5", legal_basis="GDPR Art. 17(1)(a)", note="", username="olga"
        )
        skill_id = Skill.objects.get(name="reset-password").pk
        hold = services.hold_place(
            kind="subject",
            value="cust-held-a11y",
            reason="litigation",
            username="olga",
            four_eyes=False,
            review_by=timezone.now().date() + timedelta(days=5),
        )
    connection.set_schema_to_public()
    with asgi_server(ENGRAM_SERVE_STATIC="1") as port:
        yield Site(f"http://{host}:{port}", skill_id, str(erasure.pk), hold.pk)
    with tenant_context(scratch_tenant):  # an active hold refuses the tenant's deletion
        services.hold_release(hold=hold, username="olga", reason="test over")
    connection.set_schema_to_public()


def test_the_vendored_axe_is_the_release_named() -> None:
    assert hashlib.sha256(AXE.read_bytes()).hexdigest() == AXE_SHA256


def test_the_main_pages_have_no_critical_or_serious_violations_in_chromium(
    chromium_path: Path,  # noqa: F811 (the fixture imported above)
    a11y_site: Site,
) -> None:
    base = a11y_site.base
    pages = {
        "pavel": {
            "home (officer)": "/admin/",
            "timeline": "/admin/sessions/?session=s-onboarding",
            "erasure request form": "/admin/compliance/erasurerequest/new/",
            "erasure page (second officer)": f"/admin/compliance/erasurerequest/{a11y_site.erasure_id}/",
            "legal holds": "/admin/compliance/legalhold/",
            "legal hold (review date)": f"/admin/compliance/legalhold/{a11y_site.hold_id}/change/",
        },
        "oscar": {
            "home (operator)": "/admin/",
            "contradiction queue": "/admin/memory/contradiction/queue/",
            "skill editor": f"/admin/memory/skill/{a11y_site.skill_id}/versions/1/",
        },
    }
    found: dict[str, list[dict]] = {}
    with chromium(chromium_path) as browser:
        for username, urls in pages.items():
            page = login(browser, base, username)
            for name, path in urls.items():
                page.goto(f"{base}{path}")
                page.wait_for_load_state("networkidle")
                page.add_script_tag(path=str(AXE))
                violations = page.evaluate(VIOLATIONS)
                blocking = [v for v in violations if v["impact"] in BLOCKING]
                if blocking:
                    found[name] = blocking
    assert not found, "\n".join(
        f"{name}: {v['impact']} {v['id']} ({v['help']}): {v['nodes']}"
        for name, vs in found.items()
        for v in vs
    )
