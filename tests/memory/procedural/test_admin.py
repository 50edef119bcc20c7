"""The skill editor in the tenant admin (Django's test client, the real PostgreSQL): operators edit,
validate, save under a revision, publish, retire, roll back, diff and review agents' proposals;
compliance officers see the same pages without a control; nobody else sees them."""

from __future__ import annotations

import json
import re
import time

import pytest
from django.test import Client
from django_tenants.utils import tenant_context

from memory.episodic.models import Event, EventKind
from memory.procedural.models import Skill, SkillVersion, VersionStatus
from tests.factories import (
    HTMX,
    PASSWORD_RESET_STEPS,
    Caller,
    admin_client,
    requires_model,
    skill_publish,
    skill_seed,
)
from tests.memory.procedural.test_validation import nested_all

pytestmark = requires_model


def skill_pk(caller: Caller) -> int:
    with tenant_context(caller.tenant):
        return Skill.objects.get(name="reset-password").pk


def version_url(pk: int, number: int, action: str = "") -> str:
    return f"/admin/memory/skill/{pk}/versions/{number}/" + (f"{action}/" if action else "")


def main(html: str) -> str:
    """The page's own content, without the admin's header (log out, theme toggle) and footer."""
    return html.split('id="content-main"')[1].split('id="footer"')[0]


def editor_form(version: SkillVersion, steps: list[dict] | None = None, **extra: str) -> dict[str, str]:
    """What the editor's form posts for ``steps`` (default: the version's)."""
    steps = version.steps if steps is None else steps
    data = {
        "revision": str(version.revision),
        "step_count": str(len(steps)),
        "input_schema": json.dumps(version.input_schema),
        "change_note": version.change_note,
    }
    for i, step in enumerate(steps):
        data.update(
            {
                f"step-{i}-id": step.get("id", ""),
                f"step-{i}-tool": step.get("tool", ""),
                f"step-{i}-params": json.dumps(step.get("params", {})),
                f"step-{i}-when": step.get("when", ""),
                f"step-{i}-on_error": step.get("on_error", ""),
                f"step-{i}-retries": str(step.get("retries", "")),
                f"step-{i}-output_as": step.get("output_as", ""),
            }
        )
    return {**data, **extra}


@pytest.fixture
def draft(alice: Caller) -> SkillVersion:
    """reset-password v1 published and v2, a draft copied from it by an operator."""
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    from memory.procedural.services.common import Actor
    from memory.procedural.services.versions import draft_create

    with tenant_context(alice.tenant):
        return draft_create(actor=Actor(username="op"), name="reset-password", from_number=1)


@pytest.fixture
def operator(alice: Caller) -> Client:
    return admin_client(alice.tenant, "op", group="operator")


@pytest.fixture
def officer(alice: Caller) -> Client:
    return admin_client(alice.tenant, "officer", group="compliance officer")


def test_the_operator_gets_the_editor_and_the_officer_the_same_page_without_controls(
    alice: Caller, draft: SkillVersion, operator: Client, officer: Client
) -> None:
    url = version_url(draft.skill_id, draft.number)
    editing = operator.get(url).content.decode()
    assert 'id="editor-form"' in editing and 'id="add-step"' in editing and 'id="publish-button"' in editing
    reading = officer.get(url).content.decode()
    assert "verify_code" in reading and "steps.send_code.output.challenge_id" in reading
    for control in ("<form", "<textarea", "<button", "<input", 'id="publish-button"'):
        assert control not in main(reading), control
    assert officer.post(url, editor_form(draft, op="save"), **HTMX).status_code == 403
    for action in ("publish", "retire", "draft"):
        assert officer.post(version_url(draft.skill_id, draft.number, action), {}).status_code == 403
    with tenant_context(alice.tenant):
        assert SkillVersion.objects.get(pk=draft.pk).revision == draft.revision


def test_adding_removing_and_moving_steps_is_done_by_the_server_without_saving(
    alice: Caller, draft: SkillVersion, operator: Client
) -> None:
    url = version_url(draft.skill_id, draft.number)
    added = operator.post(url, editor_form(draft, op="add"), **HTMX).content.decode()
    assert 'name="step-5-id" value="step_6"' in added and 'name="step_count" value="6"' in added
    moved = operator.post(url, editor_form(draft, op="up:4"), **HTMX).content.decode()
    assert moved.index('value="follow_up"') < moved.index('value="notify"')
    removed = operator.post(url, editor_form(draft, op="remove:0"), **HTMX).content.decode()
    assert 'name="step_count" value="4"' in removed
    # the reference to the removed step is now an error next to the step that makes it
    assert "no step &#x27;send_code&#x27;" in removed
    with tenant_context(alice.tenant):
        assert SkillVersion.objects.get(pk=draft.pk).steps == PASSWORD_RESET_STEPS  # nothing saved


def test_validation_as_you_type_answers_only_the_problem_lists(draft: SkillVersion, operator: Client) -> None:
    steps = [*PASSWORD_RESET_STEPS, {"id": "ask_again", "tool": "ask_user", "params": {"question": 7}}]
    response = operator.post(
        version_url(draft.skill_id, draft.number), editor_form(draft, steps, op="validate"), **HTMX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="errors-step-5" hx-swap-oob="true"' in html and "steps[5].params.question" in html
    assert "7 is not of type" in html
    assert 'id="editor-form"' not in html  # the form the user types in is left alone
    assert "Unsaved changes" in html  # and publishing waits for a save


def test_bad_json_in_params_is_an_error_at_that_step_and_is_not_saved(
    alice: Caller, draft: SkillVersion, operator: Client
) -> None:
    data = editor_form(draft, op="save")
    data["step-2-params"] = '{"user_id": '
    response = operator.post(version_url(draft.skill_id, draft.number), data, **HTMX)
    assert response.status_code == 400
    html = response.content.decode()
    assert "params is not valid JSON" in html and "nothing was saved" in html
    with tenant_context(alice.tenant):
        assert SkillVersion.objects.get(pk=draft.pk).revision == draft.revision


def test_a_save_names_its_revision_and_a_stale_one_is_a_409(
    alice: Caller, draft: SkillVersion, operator: Client
) -> None:
    url = version_url(draft.skill_id, draft.number)
    other = admin_client(alice.tenant, "op2", group="operator")
    first = operator.post(
        url, editor_form(draft, PASSWORD_RESET_STEPS[:4], op="save", change_note="mine"), **HTMX
    )
    assert first.status_code == 200 and "Saved v2 (revision 2)" in first.content.decode()
    stale = other.post(
        url, editor_form(draft, PASSWORD_RESET_STEPS[:3], op="save", change_note="theirs"), **HTMX
    )
    assert stale.status_code == 409
    assert "Someone saved v2 since you opened it" in stale.content.decode()
    with tenant_context(alice.tenant):
        saved = SkillVersion.objects.get(pk=draft.pk)
        assert (saved.revision, saved.change_note, len(saved.steps)) == (2, "mine", 4)
        [event] = Event.objects.filter(payload_index__action="skill_draft_save")
        assert (event.actor, event.payload["diff_size"]) == ("user:op", 1)


def test_publish_diff_and_rollback_through_the_admin(
    alice: Caller, draft: SkillVersion, operator: Client
) -> None:
    url = version_url(draft.skill_id, draft.number)
    operator.post(url, editor_form(draft, PASSWORD_RESET_STEPS[:4], op="save"), **HTMX)
    page = operator.post(version_url(draft.skill_id, 2, "publish"), {"expected_published": "1"}, follow=True)
    assert "Published reset-password v2." in page.content.decode()
    assert alice.get("/api/v1/skills/reset-password").json()["version"]["number"] == 2
    diff = operator.get(f"/admin/memory/skill/{draft.skill_id}/diff/?a=1&b=2").content.decode()
    assert re.search(r'data-kind="removed" data-step="follow_up"', diff)
    assert "1 change" in diff
    back = operator.post(version_url(draft.skill_id, 1, "publish"), {"expected_published": "2"}, follow=True)
    assert "Rolled back reset-password to v1." in back.content.decode()
    assert alice.get("/api/v1/skills/reset-password").json()["version"]["number"] == 1
    with tenant_context(alice.tenant):
        rollback = Event.objects.filter(payload_index__action="skill_rollback").get()
        assert (rollback.payload["from_version"], rollback.payload["to_version"], rollback.actor) == (
            2,
            1,
            "user:op",
        )


def test_a_stored_proposal_with_a_costly_condition_does_not_hold_up_the_queue(
    alice: Caller, bob: Caller, draft: SkillVersion, operator: Client
) -> None:
    # proposed before conditions were evaluated within a budget: the queue compiles it on every load
    response = bob.post("/api/v1/skills/reset-password/versions", {"steps": PASSWORD_RESET_STEPS})
    number = response.json()["version"]["number"]
    steps = [dict(step) for step in PASSWORD_RESET_STEPS]
    steps[4]["when"] = nested_all(5)
    with tenant_context(alice.tenant):
        SkillVersion.objects.filter(skill_id=draft.skill_id, number=number).update(steps=steps)
    started = time.thread_time()  # CPU time of this thread, whatever else runs on the machine
    queue = operator.get("/admin/memory/skill/proposals/").content.decode()
    assert time.thread_time() - started < 2.0
    assert f"reset-password v{number}" in queue and "Evaluating this expression takes more than" in queue


def test_a_publish_based_on_a_stale_view_changes_nothing(
    alice: Caller, draft: SkillVersion, operator: Client
) -> None:
    page = operator.post(version_url(draft.skill_id, 2, "publish"), {"expected_published": ""}, follow=True)
    assert "was not published" in page.content.decode() and "v1 is published now" in page.content.decode()
    with tenant_context(alice.tenant):
        assert SkillVersion.objects.get(pk=draft.pk).status == VersionStatus.DRAFT


def test_an_agents_proposal_is_marked_and_reviewed_in_the_queue(
    alice: Caller, bob: Caller, draft: SkillVersion, operator: Client, officer: Client
) -> None:
    response = bob.post(
        "/api/v1/skills/reset-password/versions",
        {"steps": PASSWORD_RESET_STEPS[:4], "change_note": "no question", "session_id": "s-42"},
    )
    number = response.json()["version"]["number"]
    queue = operator.get("/admin/memory/skill/proposals/").content.decode()
    assert f"reset-password v{number}" in queue and "proposed by <strong>bob</strong>" in queue
    assert "1 change from v1" in queue and "Compiles against" in queue
    assert "Proposals from agents (1)" in operator.get("/admin/memory/skill/").content.decode()
    assert "proposed by agents" in operator.get("/admin/memory/skill/").content.decode()
    assert (
        "Proposed by the agent <strong>bob</strong>"
        in operator.get(version_url(draft.skill_id, number)).content.decode()
    )
    officer_queue = officer.get("/admin/memory/skill/proposals/").content.decode()
    assert f"reset-password v{number}" in officer_queue and "<button" not in main(officer_queue)
    published = operator.post(
        version_url(draft.skill_id, number, "publish"),
        {"expected_published": "1", "next": "/admin/memory/skill/proposals/"},
        follow=True,
    )
    assert f"Published reset-password v{number}." in published.content.decode()
    assert "No proposals to review." in published.content.decode()
    with tenant_context(alice.tenant):
        event = Event.objects.filter(payload_index__action="skill_publish").latest("seq")
        assert (event.payload["proposed_by"], event.payload["from_version"], event.payload["to_version"]) == (
            "bob",
            1,
            number,
        )


def test_rejecting_a_proposal_retires_it(
    alice: Caller, bob: Caller, draft: SkillVersion, operator: Client
) -> None:
    number = bob.post("/api/v1/skills/reset-password/versions", {"steps": PASSWORD_RESET_STEPS[:4]}).json()[
        "version"
    ]["number"]
    operator.post(version_url(draft.skill_id, number, "retire"), {"next": "/admin/memory/skill/proposals/"})
    with tenant_context(alice.tenant):
        assert (
            SkillVersion.objects.get(skill_id=draft.skill_id, number=number).status == VersionStatus.RETIRED
        )
        event = Event.objects.filter(payload_index__action="skill_reject").get()
        assert (event.payload["proposed_by"], event.actor) == ("bob", "user:op")


def test_skills_are_created_and_described_through_the_services(alice: Caller, operator: Client) -> None:
    created = operator.post(
        "/admin/memory/skill/add/",
        {
            "name": "close-account",
            "title": "Close an account",
            "description": "",
            "intents_lines": "close my account\ndelete me",
            "tags_text": "accounts",
            "owner": "support",
        },
    )
    assert created.status_code == 302, created.content.decode()[:2000]
    with tenant_context(alice.tenant):
        skill = Skill.objects.get(name="close-account")
        assert (skill.intents, skill.tags, skill.embedding is not None) == (
            ["close my account", "delete me"],
            ["accounts"],
            True,
        )
        assert SkillVersion.objects.get(skill=skill).status == VersionStatus.DRAFT
    changed = operator.post(
        f"/admin/memory/skill/{skill.pk}/change/",
        {
            "title": "Close a customer account",
            "description": "",
            "intents_lines": "close my account",
            "tags_text": "accounts",
            "owner": "support",
        },
    )
    assert changed.status_code == 302
    with tenant_context(alice.tenant):
        update = Event.objects.filter(payload_index__action="skill_update").get()
        assert update.actor == "user:op"
        assert update.payload["changes"]["title"] == ["Close an account", "Close a customer account"]
        assert Event.objects.filter(kind=EventKind.DECISION, payload_index__action="skill_create").exists()


def test_the_list_shows_the_published_version_its_success_rate_and_open_drafts(
    alice: Caller, draft: SkillVersion, operator: Client
) -> None:
    for success in (True, True, False):
        body = {"version": 1, "success": success} | ({} if success else {"failed_step": "verify"})
        assert alice.post("/api/v1/skills/reset-password/runs", body).status_code == 201
    html = operator.get("/admin/memory/skill/").content.decode()
    assert "v1" in html and "67% of 3" in html
    assert re.search(r'<td class="field-drafts">1</td>', html)


def test_a_staff_user_without_permissions_sees_nothing_of_a_skill(alice: Caller, draft: SkillVersion) -> None:
    nobody = admin_client(alice.tenant, "nobody")
    for url in (
        version_url(draft.skill_id, 2),
        f"/admin/memory/skill/{draft.skill_id}/diff/",
        "/admin/memory/skill/proposals/",
    ):
        response = nobody.get(url)
        assert response.status_code == 403 and "reset-password" not in response.content.decode()


def test_another_tenants_admin_shows_nothing_of_the_skill(
    tenant_b, alice: Caller, draft: SkillVersion
) -> None:  # type: ignore[no-untyped-def]
    # tenant_b first: it reads the public schema, which ``draft``'s API requests leave for alpha's
    # (and alpha's database role may not read tenants_tenant)
    outsider = admin_client(tenant_b, "op-beta", group="operator")
    assert "reset-password" not in outsider.get("/admin/memory/skill/").content.decode()
    for url in (
        version_url(draft.skill_id, 1),
        version_url(draft.skill_id, 2),
        f"/admin/memory/skill/{draft.skill_id}/diff/",
        f"/admin/memory/skill/{draft.skill_id}/change/",
    ):
        response = outsider.get(url)
        assert response.status_code in (302, 404) and "reset-password" not in response.content.decode(), url
    assert "reset-password" not in outsider.get("/admin/memory/skill/proposals/").content.decode()
    assert (
        outsider.post(version_url(draft.skill_id, 2, "publish"), {"expected_published": "1"}).status_code
        == 404
    )
    with tenant_context(alice.tenant):
        assert SkillVersion.objects.get(pk=draft.pk).status == VersionStatus.DRAFT
