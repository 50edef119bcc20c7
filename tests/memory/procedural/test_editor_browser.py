"""A real browser edits, publishes, diffs and rolls back a skill: Playwright drives Debian's Chromium
against uvicorn serving the test database (as the contradiction queue's browser test does).

The operator opens draft v2, adds a step, gives it params the tool's contract refuses and sees the
error next to that step while typing, fixes it, saves, publishes, opens the diff against v1 and
rolls back to v1. A compliance officer then opens the same pages and finds no control on them.
``ENGRAM_SCREENSHOTS=<dir>`` keeps screenshots.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django_tenants.utils import tenant_context

from memory.episodic.models import Event
from memory.procedural.models import SkillVersion
from memory.procedural.services.common import Actor
from memory.procedural.services.versions import draft_create
from tenants.models import Domain, Tenant
from tests.factories import PASSWORD, asgi_server, make_caller, requires_model, skill_publish, skill_seed
from tests.memory.knowledge.test_review_queue_browser import CHROMIUM_ARGS, _screenshot, chromium_path

__all__ = ["chromium_path"]  # the fixture, shared with the contradiction queue's browser test

pytestmark = requires_model


@dataclass
class Site:
    tenant: Tenant
    base: str
    skill_id: int


@pytest.fixture
def live_site(scratch_tenant: Tenant) -> Iterator[Site]:
    """The scratch tenant with a domain, an operator and an officer, the password-reset skill (v1
    published, v2 a draft copied from it), and uvicorn serving it."""
    host = f"{scratch_tenant.schema_name.replace('_', '-')}.localhost"
    Domain.objects.create(domain=host, tenant=scratch_tenant, is_primary=True)
    agent = make_caller(scratch_tenant, "support-bot")
    skill_seed(agent)
    skill_publish(scratch_tenant, "reset-password", 1, username="operator")
    with tenant_context(scratch_tenant):
        for name, group in (("operator", "operator"), ("officer", "compliance officer")):
            user = User.objects.create_user(name, f"{name}@example.com", PASSWORD, is_staff=True)
            user.groups.add(Group.objects.get(name=group))
        draft = draft_create(actor=Actor(username="operator"), name="reset-password", from_number=1)
        skill_id = draft.skill_id
    connection.set_schema_to_public()
    with asgi_server(ENGRAM_SERVE_STATIC="1") as port:
        yield Site(scratch_tenant, f"http://{host}:{port}", skill_id)


def _login(browser, site: Site, username: str):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1360, "height": 1000})
    page.set_default_timeout(15_000)
    page.goto(f"{site.base}/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#user-tools")).to_contain_text(username)
    return page


def test_operator_edits_publishes_diffs_and_rolls_back_and_an_officer_only_reads(
    chromium_path: Path, live_site: Site, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    v2 = f"{live_site.base}/admin/memory/skill/{live_site.skill_id}/versions/2/"
    v1 = f"{live_site.base}/admin/memory/skill/{live_site.skill_id}/versions/1/"
    diff = f"{live_site.base}/admin/memory/skill/{live_site.skill_id}/diff/?a=1&b=2"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_ARGS, headless=True)
        try:
            page = _login(browser, live_site, "operator")
            page.goto(v2)
            page.wait_for_function("() => window.htmx !== undefined")
            expect(page.locator("#version-status")).to_have_text("draft")
            expect(page.locator("fieldset.sk-step")).to_have_count(5)

            page.click("#add-step")
            new_step = page.locator("#step-5")
            expect(new_step).to_have_count(1)
            new_step.locator("select[name=step-5-tool]").select_option("ask_user")
            new_step.locator("textarea[name=step-5-params]").fill('{"question": 42}')
            # checked as the operator types: the error appears next to that step, and publishing waits
            expect(page.locator("#errors-step-5")).to_contain_text("42 is not of type 'string'")
            expect(page.locator("#errors-step-5")).to_contain_text("steps[5].params.question")
            expect(page.locator("#errors-step-4")).to_have_text("")
            expect(page.locator("#publish-box")).to_contain_text("save the draft before publishing")
            _screenshot(page, "skill-editor-error.png", tmp_path)

            new_step.locator("textarea[name=step-5-params]").fill('{"question": "Anything else I can do?"}')
            expect(page.locator("#errors-step-5")).to_have_text("")
            expect(page.locator("#compile-summary")).to_contain_text("Compiles")
            page.click("#save-draft")
            expect(page.locator("#editor-saved")).to_contain_text("Saved v2 (revision 2)")

            page.click("#publish-button")
            expect(page.locator("ul.messagelist")).to_contain_text("Published reset-password v2.")
            expect(page.locator("#version-status")).to_have_text("published")
            expect(page.locator("#editor-form")).to_have_count(0)  # published: read-only from now on

            page.click("#diff-link")
            expect(page.locator("#diff-summary")).to_contain_text("1 change")
            added = page.locator('#diff-table tr[data-kind="added"]')
            expect(added).to_have_attribute("data-step", "step_6")
            expect(added).to_contain_text("Anything else I can do?")
            _screenshot(page, "skill-diff.png", tmp_path)

            page.goto(v1)
            asked: list[str] = []  # the rollback asks first, naming the version it retires
            page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
            page.click("#rollback-button")
            assert asked and "retire v2" in asked[0], asked
            expect(page.locator("ul.messagelist")).to_contain_text("Rolled back reset-password to v1.")
            expect(page.locator("#version-status")).to_have_text("published")

            officer = _login(browser, live_site, "officer")
            for url in (v2, v1, diff, f"{live_site.base}/admin/memory/skill/proposals/"):
                officer.goto(url)
                main = officer.locator("#content-main")
                expect(main).to_be_visible()
                for control in ("form", "button", "textarea", "input", "select:not([name=a]):not([name=b])"):
                    if url == diff and control in ("form", "button", "select:not([name=a]):not([name=b])"):
                        continue  # the diff's version choice (a GET form) changes nothing
                    expect(main.locator(control)).to_have_count(0)
            officer.goto(v2)
            expect(officer.locator("#content-main")).to_contain_text("Anything else I can do?")
            _screenshot(officer, "skill-officer.png", tmp_path)
        finally:
            browser.close()

    with tenant_context(live_site.tenant):
        states = dict(SkillVersion.objects.values_list("number", "status"))
        assert states == {1: "published", 2: "retired"}
        assert SkillVersion.objects.get(number=2).steps[-1]["params"] == {
            "question": "Anything else I can do?"
        }
        actions = [
            (e.payload["action"], e.payload.get("from_version"), e.payload.get("to_version"), e.actor)
            for e in Event.objects.filter(
                payload_index__action__in=["skill_publish", "skill_rollback"]
            ).order_by("seq")
        ]
        assert actions == [
            ("skill_publish", None, 1, "user:operator"),
            ("skill_publish", 1, 2, "user:operator"),
            ("skill_rollback", 2, 1, "user:operator"),
        ]
