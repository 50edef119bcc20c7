"""Links both ways between the session timeline and what it mentions, in a real browser (Playwright
drives Debian's Chromium against uvicorn on the test database) at 1366x768: a skill run reported in
a session is a row of its timeline linking the run (and the skill version), and the run's page
links back to the timeline; a contradiction's page links the timelines of the sessions that
asserted its facts, whose rows link the facts, whose pages link back. Screenshots in
``var/test-artifacts/screens/``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection
from django_tenants.utils import tenant_context

from agents.services import agent_create
from memory.procedural.services.runs import RunData, skill_run_report
from tenants.models import Tenant
from tests.compliance.browser import chromium, login, people_create, shot, site_host
from tests.factories import (
    asgi_server,
    conflict_make,
    make_caller,
    requires_model,
    say,
    skill_publish,
    skill_seed,
)
from tests.memory.knowledge.test_review_queue_browser import chromium_path  # noqa: F401

pytestmark = requires_model  # the skill is embedded for matching when it is proposed


@dataclass
class Site:
    base: str
    run_id: int
    contradiction_id: int
    new_fact_id: int


@pytest.fixture
def links_site(scratch_tenant: Tenant) -> Iterator[Site]:
    host = site_host(scratch_tenant)
    bot = make_caller(scratch_tenant, "support-bot")
    skill_seed(bot)
    skill_publish(scratch_tenant, "reset-password", 1)
    with tenant_context(scratch_tenant):
        people_create(scratch_tenant, olga="compliance officer", oscar="operator")
        say(bot.agent, "s-ticket", "Customer cannot log in")
        run = skill_run_report(
            agent=bot.agent,
            name="reset-password",
            data=RunData(version=1, success=True, duration_ms=1200, session_id="s-ticket"),
        )
        dispute = conflict_make(agent_create(by=None, name="alice"), agent_create(by=None, name="bob"))
    connection.set_schema_to_public()
    with asgi_server(ENGRAM_SERVE_STATIC="1") as port:
        yield Site(f"http://{host}:{port}", run.pk, dispute.contradiction.pk, dispute.new.pk)


def test_the_timeline_and_what_it_mentions_link_both_ways_in_chromium(
    chromium_path: Path,  # noqa: F811 (the fixture imported above)
    links_site: Site,
) -> None:
    from playwright.sync_api import expect

    base = links_site.base
    with chromium(chromium_path) as browser:
        page = login(browser, base, "olga", then="/admin/sessions/?session=s-ticket")
        run_row = page.locator(".tl-row", has_text="skill run")
        expect(run_row).to_contain_text("reset-password v1: succeeded in 1200 ms")
        shot(page, "timeline-skill-run.png")
        run_row.locator("a.tl-object").click()  # the timeline -> the run
        expect(page).to_have_url(re.compile(f"/admin/memory/skillrun/{links_site.run_id}/change/"))
        page.locator(".field-session a", has_text="s-ticket").click()  # the run -> its timeline
        expect(page).to_have_url(re.compile(r"/admin/sessions/\?session=s-ticket"))
        page.locator(".tl-row", has_text="skill run").locator("a", has_text="reset-password v1").click()
        expect(page.locator("h1")).to_contain_text("reset-password")

        # the contradiction -> the sessions that asserted its facts -> the fact -> back
        page.goto(f"{base}/admin/memory/contradiction/{links_site.contradiction_id}/change/")
        trail = page.locator(".field-in_the_trail")
        expect(trail).to_contain_text("existing fact asserted in: s-onboarding")
        expect(trail).to_contain_text("new fact asserted in: s-review")
        shot(page, "contradiction-in-the-trail.png")
        trail.locator("a", has_text="s-review").click()
        expect(page).to_have_url(re.compile(r"/admin/sessions/\?session=s-review"))
        page.locator("a.tl-object", has_text=f"asserted fact #{links_site.new_fact_id}").click()
        expect(page).to_have_url(re.compile(f"/admin/memory/fact/{links_site.new_fact_id}/change/"))
        page.locator("a", has_text="s-review").first.click()
        expect(page).to_have_url(re.compile(r"/admin/sessions/\?session=s-review"))

        # the operator reaches the same timeline from the run
        page = login(browser, base, "oscar", then=f"/admin/memory/skillrun/{links_site.run_id}/change/")
        page.locator(".field-session a", has_text="s-ticket").click()
        expect(page.locator(".tl-row", has_text="skill run")).to_be_visible()
