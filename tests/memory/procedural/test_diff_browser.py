"""The skill diff at line level, in a real browser (Playwright drives Debian's Chromium against
uvicorn on the test database) at 1366x768: an agent proposes v2 of a published skill with one
step's question reworded; the diff marks the changed line removed on the left and added on the
right, folds the unchanged steps, and shows each version's change note and tool versions.

The screenshot is kept in ``var/test-artifacts/screens/`` (git-ignored).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django_tenants.utils import tenant_context

from memory.procedural.models import Skill
from memory.procedural.services import proposals as services
from tenants.models import Tenant
from tests.compliance.browser import chromium, login, shot, site_host
from tests.factories import (
    PASSWORD,
    PASSWORD_RESET_STEPS,
    asgi_server,
    make_caller,
    requires_model,
    skill_publish,
    skill_seed,
)
from tests.memory.knowledge.test_review_queue_browser import chromium_path  # noqa: F401

pytestmark = requires_model

OLD_QUESTION = "Did the reset link work for you?"
NEW_QUESTION = "Could you sign in with the new password?"


@pytest.fixture
def diff_url(scratch_tenant: Tenant) -> Iterator[str]:
    host = site_host(scratch_tenant)
    caller = make_caller(scratch_tenant, "support-bot")
    skill_seed(caller)
    skill_publish(scratch_tenant, "reset-password", 1, username="oscar")
    steps = copy.deepcopy(PASSWORD_RESET_STEPS)
    follow_up = next(step for step in steps if step["id"] == "follow_up")
    follow_up["params"]["question"] = NEW_QUESTION
    with tenant_context(scratch_tenant):
        user = User.objects.create_user("oscar", "oscar@example.com", PASSWORD, is_staff=True)
        user.groups.add(Group.objects.get(name="operator"))
        services.skill_version_propose(
            agent=caller.agent,
            name="reset-password",
            steps=steps,
            change_note="ask whether the new password works, not the link",
            based_on=1,
        )
        skill_id = Skill.objects.get(name="reset-password").pk
    connection.set_schema_to_public()
    with asgi_server(ENGRAM_SERVE_STATIC="1") as port:
        yield f"http://{host}:{port}/admin/memory/skill/{skill_id}/diff/?a=1&b=2"


def test_the_skill_diff_marks_lines_folds_unchanged_steps_and_shows_notes_in_chromium(
    chromium_path: Path,  # noqa: F811 (the fixture imported above)
    diff_url: str,
) -> None:
    from playwright.sync_api import expect

    with chromium(chromium_path) as browser:
        base, path = diff_url.split("/admin/", 1)
        page = login(browser, base, "oscar", then=f"/admin/{path}")
        changed = page.locator('#diff-table tr[data-step="follow_up"]')
        expect(changed).to_have_attribute("data-kind", "changed")
        expect(changed.locator(".sk-left .sk-line.is-del")).to_have_text(
            [f'    "question": "{OLD_QUESTION}"']
        )
        expect(changed.locator(".sk-right .sk-line.is-add")).to_have_text(
            [f'    "question": "{NEW_QUESTION}"']
        )
        assert changed.locator(".sk-line.is-same").count() > 2  # the rest of the step, unmarked
        folded = page.locator('#diff-table tr[data-kind="unchanged"]')
        assert folded.count() >= 3
        expect(folded.first.locator("details")).not_to_have_attribute("open", "")
        expect(folded.first.locator("pre")).not_to_be_visible()
        expect(page.locator("#diff-about-right")).to_contain_text("ask whether the new password works")
        expect(page.locator("#diff-about-left .sk-tools")).to_contain_text("ask_user")
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
        shot(page, "skill-diff.png")
