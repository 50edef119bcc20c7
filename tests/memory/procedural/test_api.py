"""Procedural memory over the agent API, against the real PostgreSQL: tools and their versions,
agents' proposals (drafts, never published by an agent), matching, versions, run reports, clear
400s naming the step and JSON path, idempotent POSTs, and another tenant seeing nothing."""

from __future__ import annotations

import copy

import pytest
from django_tenants.utils import tenant_context

from memory.episodic.models import Event, EventKind
from memory.procedural.models import Skill, SkillRun, SkillVersion, ToolVersion, VersionStatus
from tests.factories import (
    PASSWORD_RESET,
    PASSWORD_RESET_STEPS,
    PASSWORD_RESET_TOOLS,
    Caller,
    object_schema,
    requires_model,
    skill_publish,
    skill_seed,
    tools_define,
)
from tests.memory.procedural.test_validation import nested_all
from tests.memory.semantic.test_embedder_unavailable import embedder_endpoint

pytestmark = requires_model  # skills are embedded with the tenant's model
__all__ = ["embedder_endpoint"]  # the fixture, shared with semantic memory's tests

SKILL = "/api/v1/skills/reset-password"


def tool_body(name: str = "send_email", **changes: object) -> dict:
    description, input_schema, output_schema = PASSWORD_RESET_TOOLS[name]
    return {
        "name": name,
        "description": description,
        "input_schema": input_schema,
        "output_schema": output_schema,
        **changes,
    }


def decisions(caller: Caller, action: str) -> list[Event]:
    with tenant_context(caller.tenant):
        return list(
            Event.objects.filter(kind=EventKind.DECISION, payload_index__action=action).order_by("seq")
        )


# --- tools ----------------------------------------------------------------------------------------------


def test_a_tool_is_created_then_versioned_and_the_same_contract_changes_nothing(alice: Caller) -> None:
    created = alice.post("/api/v1/tools", tool_body())
    assert created.status_code == 201, created.content
    assert (created.json()["version"], created.json()["created"], created.json()["author"]) == (
        1,
        True,
        "agent:alice",
    )
    again = alice.post("/api/v1/tools", tool_body())
    assert (again.status_code, again.json()["version"], again.json()["created"]) == (200, 1, False)
    changed = alice.post("/api/v1/tools", tool_body(description="Send a templated e-mail (v2)."))
    assert (changed.status_code, changed.json()["version"]) == (201, 2)
    detail = alice.get("/api/v1/tools/send_email").json()
    assert (detail["version"], detail["versions"]) == (2, [2, 1])
    assert (
        alice.get("/api/v1/tools/send_email", {"version": 1}).json()["description"]
        == "Send a templated e-mail."
    )
    listed = alice.get("/api/v1/tools").json()
    assert [(t["name"], t["version"]) for t in listed["results"]] == [("send_email", 2)]
    assert [e.payload["version"] for e in decisions(alice, "tool_version_create")] == [1, 2]


@pytest.mark.parametrize(
    ("field", "schema", "path"),
    [
        (
            "input_schema",
            {"type": "object", "properties": {"to": {"type": "text"}}, "required": []},
            "input_schema.properties.to.type",
        ),
        ("output_schema", {"type": "array", "items": {}}, "output_schema.type"),
        ("input_schema", {"type": "object", "properties": {}}, "input_schema.required"),
    ],
)
def test_a_tool_schema_that_is_not_a_2020_12_object_schema_is_a_400_naming_the_path(
    alice: Caller, field: str, schema: dict, path: str
) -> None:
    response = alice.post("/api/v1/tools", tool_body(**{field: schema}))
    assert response.status_code == 400, response.content
    assert path in response.json()["errors"], response.json()
    with tenant_context(alice.tenant):
        assert not ToolVersion.objects.exists()


def test_a_changed_tool_gets_a_new_version_and_a_published_skill_keeps_its_own(alice: Caller) -> None:
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    _, input_schema, _output_schema = PASSWORD_RESET_TOOLS["send_email"]
    stricter = {**input_schema, "required": ["to", "template", "data"]}
    assert alice.post("/api/v1/tools", tool_body(input_schema=stricter)).json()["version"] == 2
    published = alice.get(SKILL).json()["version"]
    assert published["tool_versions"]["send_email"] == 1
    # the published version still compiles against what it pinned; a new proposal meets v2
    with tenant_context(alice.tenant):
        assert ToolVersion.objects.get(tool__name="send_email", version=1).input_schema == input_schema
    steps = copy.deepcopy(PASSWORD_RESET_STEPS)
    steps[3]["params"].pop("data")
    refused = alice.post(f"{SKILL}/versions", {"steps": steps})
    assert refused.status_code == 400
    assert "steps[3].params" in refused.json()["errors"]


# --- proposals --------------------------------------------------------------------------------------------


def test_an_agents_proposal_lands_as_a_draft_that_nobody_is_served(alice: Caller) -> None:
    body = skill_seed(alice, session_id="s-run-17", change_note="worked in s-run-17")
    version = body["version"]
    assert (body["name"], version["number"], version["status"]) == ("reset-password", 1, "draft")
    assert (version["proposed_by"], version["author"], version["published_at"]) == (
        "alice",
        "agent:alice",
        None,
    )
    assert alice.get(SKILL).status_code == 404  # nothing published yet
    assert alice.get(SKILL).json()["detail"] == "Skill 'reset-password' has no published version."
    assert alice.get("/api/v1/skills", {"intent": "I forgot my password"}).json()["results"] == []
    assert alice.get(f"{SKILL}/versions/1").json()["version"]["status"] == "draft"
    [proposal] = decisions(alice, "skill_propose")
    assert proposal.agent_id == alice.agent.pk and proposal.actor == ""
    assert proposal.session_id == "skill:reset-password"
    # five steps added and the input schema: six changes
    wanted = {"skill": "reset-password", "from_version": None, "to_version": 1, "diff_size": 6}
    assert proposal.payload.items() >= wanted.items()
    assert proposal.payload["source_session_id"] == "s-run-17"


def test_a_new_version_proposed_from_a_run_is_a_draft_based_on_the_published_one(
    alice: Caller, bob: Caller
) -> None:
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    steps = [*copy.deepcopy(PASSWORD_RESET_STEPS[:4])]
    response = bob.post(
        f"{SKILL}/versions", {"steps": steps, "change_note": "skip the question", "session_id": "s-9"}
    )
    assert response.status_code == 201, response.content
    version = response.json()["version"]
    assert (version["number"], version["status"], version["based_on"], version["proposed_by"]) == (
        2,
        "draft",
        1,
        "bob",
    )
    assert version["input_schema"] == PASSWORD_RESET["input_schema"]  # from v1
    assert alice.get(SKILL).json()["version"]["number"] == 1  # still the published one
    proposal = decisions(bob, "skill_propose")[-1]
    assert (
        proposal.payload["from_version"],
        proposal.payload["to_version"],
        proposal.payload["diff_size"],
    ) == (1, 2, 1)
    assert proposal.agent_id == bob.agent.pk


def test_a_proposal_that_does_not_compile_is_a_400_naming_each_step_and_path(alice: Caller) -> None:
    tools_define(alice)
    steps = copy.deepcopy(PASSWORD_RESET_STEPS)
    steps[2]["params"] = {"user_id": {"$ref": "steps.notify.output.message_id"}}
    steps[4]["when"] = "input.channel"
    steps[4]["params"] = {"question": 42}
    response = alice.post("/api/v1/skills", {**PASSWORD_RESET, "steps": steps})
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid"
    assert set(body["errors"]) == {"steps[2].params.user_id", "steps[4].when", "steps[4].params.question"}
    assert body["errors"]["steps[2].params.user_id"][0].startswith(
        "Step 'reset' (#3): $ref 'steps.notify.output.message_id'"
    )
    assert {p["step"] for p in body["problems"]} == {"reset", "follow_up"}
    with tenant_context(alice.tenant):
        assert not Skill.objects.exists()


def test_a_condition_too_costly_to_evaluate_is_a_400_naming_the_step(alice: Caller) -> None:
    tools_define(alice)
    steps = copy.deepcopy(PASSWORD_RESET_STEPS)
    steps[4]["when"] = nested_all(5)  # names no input, so the compiler evaluates it: 10 ** 5 times its body
    response = alice.post("/api/v1/skills", {**PASSWORD_RESET, "steps": steps})
    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body["errors"]) == ["steps[4].when"]
    assert "Evaluating this expression takes more than" in body["errors"]["steps[4].when"][0]
    assert [p["step"] for p in body["problems"]] == ["follow_up"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": "Reset Password"}, "name"),
        ({"steps": "send a code"}, "steps"),
        ({"input_schema": {"type": "string"}}, "input_schema.type"),
        ({"title": ""}, "title"),
        ({"extra": 1}, "extra"),
        ({"intents": ["ok", 3]}, "intents[1]"),
    ],
)
def test_malformed_proposals_are_400s_naming_the_field(alice: Caller, change: dict, field: str) -> None:
    tools_define(alice)
    response = alice.post("/api/v1/skills", {**PASSWORD_RESET, **change})
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"], response.json()


def test_proposing_a_skill_whose_name_is_taken_is_a_409(alice: Caller) -> None:
    skill_seed(alice)
    again = alice.post("/api/v1/skills", PASSWORD_RESET)
    assert again.status_code == 409
    assert again.json()["errors"] == {"name": ["There is already a skill 'reset-password'."]}


def test_proposals_are_idempotent(alice: Caller) -> None:
    tools_define(alice)
    first = alice.post("/api/v1/skills", PASSWORD_RESET, **{"Idempotency-Key": "p-1"})
    replay = alice.post("/api/v1/skills", PASSWORD_RESET, **{"Idempotency-Key": "p-1"})
    assert (first.status_code, replay.status_code) == (201, 201)
    assert replay["Idempotent-Replayed"] == "true"
    ran = {"version": 1, "success": True}
    skill_publish(alice.tenant, "reset-password", 1)
    assert alice.post(f"{SKILL}/runs", ran, **{"Idempotency-Key": "r-1"}).status_code == 201
    assert alice.post(f"{SKILL}/runs", ran, **{"Idempotency-Key": "r-1"})["Idempotent-Replayed"] == "true"
    with tenant_context(alice.tenant):
        assert SkillVersion.objects.count() == 1 and SkillRun.objects.count() == 1
    assert len(decisions(alice, "skill_propose")) == 1


# --- matching -------------------------------------------------------------------------------------------


UNLOCK = {
    "name": "unlock-account",
    "title": "Unlock a locked account",
    "description": "After too many failed logins, confirm the user and lift the lock.",
    "intents": ["my account is locked", "too many login attempts"],
    "input_schema": object_schema({"email": {"type": "string"}}, ["email"]),
    "steps": [{"id": "ask", "tool": "ask_user", "params": {"question": "Which account is locked?"}}],
}
INVOICE = {
    "name": "send-invoice-copy",
    "title": "Send a copy of an invoice",
    "description": "E-mail the customer a PDF copy of a past invoice.",
    "intents": ["send me my invoice again", "I need a copy of my bill"],
    "input_schema": object_schema({"email": {"type": "string"}}, ["email"]),
    "steps": [
        {
            "id": "mail",
            "tool": "send_email",
            "params": {"to": {"$ref": "input.email"}, "template": "follow_up"},
        }
    ],
}


def test_the_match_finds_published_skills_by_intent_with_score_version_and_steps(alice: Caller) -> None:
    skill_seed(alice)
    for body in (UNLOCK, INVOICE):
        assert alice.post("/api/v1/skills", body).status_code == 201
        skill_publish(alice.tenant, body["name"], 1)
    skill_publish(alice.tenant, "reset-password", 1)
    found = alice.get("/api/v1/skills", {"intent": "I can't remember my password", "k": 3}).json()
    assert next(r["name"] for r in found["results"]) == "reset-password"
    top = found["results"][0]
    assert top["version"]["number"] == 1 and top["version"]["steps"] == PASSWORD_RESET_STEPS
    assert 0 < top["score"] <= 1 and set(top["components"]) == {
        "relevance",
        "similarity",
        "text_relevance",
        "success_prior",
    }
    assert (
        next(
            r["name"]
            for r in alice.get("/api/v1/skills", {"intent": "could you resend my invoice"}).json()["results"]
        )
        == "send-invoice-copy"
    )
    assert (
        alice.get("/api/v1/skills", {"intent": "locked out after failed logins", "k": 1}).json()["results"][
            0
        ]["name"]
        == "unlock-account"
    )


def test_success_rates_weight_the_match(alice: Caller) -> None:
    tools_define(alice)
    twin = {**UNLOCK, "name": "unlock-account-b"}
    for body in (UNLOCK, twin):
        assert alice.post("/api/v1/skills", body).status_code == 201
        skill_publish(alice.tenant, body["name"], 1)
    for _ in range(8):
        assert (
            alice.post(
                "/api/v1/skills/unlock-account/runs", {"version": 1, "success": False, "failed_step": "ask"}
            ).status_code
            == 201
        )
        assert (
            alice.post(
                "/api/v1/skills/unlock-account-b/runs", {"version": 1, "success": True, "duration_ms": 900}
            ).status_code
            == 201
        )
    ranked = alice.get("/api/v1/skills", {"intent": "my account is locked"}).json()["results"]
    assert [r["name"] for r in ranked] == ["unlock-account-b", "unlock-account"]
    assert ranked[0]["version"]["success_rate"] == 1.0 and ranked[1]["version"]["success_rate"] == 0.0
    unweighted = alice.get("/api/v1/skills", {"intent": "my account is locked", "success_weight": 0}).json()[
        "results"
    ]
    assert unweighted[0]["score"] == pytest.approx(unweighted[1]["score"])


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "intent"),
        ({"intent": "x", "k": 0}, "k"),
        ({"intent": "x", "k": 51}, "k"),
        ({"intent": "x", "success_weight": 2}, "success_weight"),
        ({"intent": "x", "q": "y"}, "q"),
    ],
)
def test_match_parameters_are_checked(alice: Caller, params: dict, field: str) -> None:
    response = alice.get("/api/v1/skills", params)
    assert response.status_code == 400 and field in response.json()["errors"], response.content


# --- runs -----------------------------------------------------------------------------------------------


def test_runs_count_per_version_and_bad_reports_are_400s(alice: Caller) -> None:
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    ok = alice.post(
        f"{SKILL}/runs", {"version": 1, "success": True, "duration_ms": 4200, "session_id": "s-1"}
    )
    assert ok.status_code == 201, ok.content
    failed = alice.post(
        f"{SKILL}/runs", {"version": 1, "success": False, "failed_step": "verify", "error": "code expired"}
    )
    assert (failed.json()["version_runs"], failed.json()["version_success_rate"]) == (2, 0.5)
    assert alice.get(SKILL).json()["version"]["runs"] == 2
    for body, field in [
        ({"version": 1, "success": False, "failed_step": "nope"}, "failed_step"),
        ({"version": 1, "success": True, "failed_step": "verify"}, "failed_step"),
        ({"version": 1, "success": "yes"}, "success"),
        ({"version": 1, "success": True, "duration_ms": -1}, "duration_ms"),
    ]:
        response = alice.post(f"{SKILL}/runs", body)
        assert response.status_code == 400 and field in response.json()["errors"], (body, response.content)
    assert alice.post(f"{SKILL}/runs", {"version": 9, "success": True}).status_code == 404
    assert alice.post("/api/v1/skills/nope/runs", {"version": 1, "success": True}).status_code == 404


def test_reading_needs_read_and_proposing_needs_write(alice: Caller) -> None:
    from tests.factories import make_caller

    reader = make_caller(alice.tenant, "reader", scopes=("read",))
    assert reader.get("/api/v1/tools").status_code == 200
    assert reader.post("/api/v1/tools", tool_body()).status_code == 403
    assert reader.post("/api/v1/skills", PASSWORD_RESET).status_code == 403


# --- isolation: every read path, from another tenant ----------------------------------------------------


def test_another_tenant_sees_nothing_on_any_path(alice: Caller, mallory: Caller) -> None:
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    assert alice.post(f"{SKILL}/runs", {"version": 1, "success": True}).status_code == 201
    assert mallory.get("/api/v1/tools").json() == {"results": [], "next": None, "previous": None}
    assert mallory.get("/api/v1/tools/send_email").status_code == 404
    assert mallory.get("/api/v1/skills", {"intent": "I forgot my password"}).json()["results"] == []
    assert mallory.get(SKILL).status_code == 404
    assert mallory.get(f"{SKILL}/versions/1").status_code == 404
    assert mallory.post(f"{SKILL}/runs", {"version": 1, "success": True}).status_code == 404
    assert mallory.post(f"{SKILL}/versions", {"steps": PASSWORD_RESET_STEPS}).status_code == 404
    # and the same name in the other tenant is another skill entirely
    assert mallory.post("/api/v1/skills", PASSWORD_RESET).status_code == 400  # mallory has none of the tools
    with tenant_context(mallory.tenant):
        assert not Skill.objects.exists() and not SkillRun.objects.exists()
    with tenant_context(alice.tenant):
        assert SkillVersion.objects.get().status == VersionStatus.PUBLISHED


def test_with_the_embedder_down_matching_and_proposing_are_503s_not_empty_answers(
    alice: Caller,
    embedder_endpoint,  # type: ignore[no-untyped-def]
) -> None:
    from devstack import free_port

    tools_define(alice)
    embedder_endpoint(f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    matched = alice.get("/api/v1/skills", {"intent": "I forgot my password"})
    assert (matched.status_code, matched.json()["code"]) == (503, "embedder_unavailable")
    proposed = alice.post("/api/v1/skills", PASSWORD_RESET)
    assert (proposed.status_code, proposed.json()["code"]) == (503, "embedder_unavailable")
    with tenant_context(alice.tenant):
        assert not Skill.objects.exists()
