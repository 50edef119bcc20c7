"""A hierarchical memory is visible to its agent and to the agents and roles it names, through the
one visibility rule: recall, the listing, one memory and forget all honour it."""

from __future__ import annotations

import pytest

from tests.factories import Caller, contents, make_caller, remember, requires_model, search

pytestmark = requires_model


@pytest.fixture
def team(alice: Caller, bob: Caller) -> dict[str, Caller]:
    """alice wrote it; bob is named; carol has the named role; dave is neither."""
    carol = make_caller(alice.tenant, "carol")
    dave = make_caller(alice.tenant, "dave")
    with_role(carol, "critic")
    with_role(dave, "planner")
    return {"alice": alice, "bob": bob, "carol": carol, "dave": dave}


def with_role(caller: Caller, role: str) -> None:
    from django_tenants.utils import tenant_context

    with tenant_context(caller.tenant):
        caller.agent.role = role
        caller.agent.save(update_fields=["role"])


def write(alice: Caller) -> dict:
    response = remember(
        alice,
        "The launch date moved to the third of March",
        scope="hierarchical",
        visible_to={"agents": ["bob"], "roles": ["critic"]},
    )
    assert response.status_code == 201, response.content
    return response.json()


def test_named_agents_and_roles_recall_it_others_do_not(team: dict[str, Caller], mallory: Caller) -> None:
    memory = write(team["alice"])
    assert memory["visible_to"] == {"agents": ["bob"], "roles": ["critic"]}
    for name in ("alice", "bob", "carol"):
        caller = team[name]
        assert "The launch date moved to the third of March" in contents(
            search(caller, "when is the launch?")
        ), name
        assert caller.get(f"/api/v1/memories/{memory['id']}").status_code == 200, name
        assert [m["id"] for m in caller.get("/api/v1/memories").json()["results"]] == [memory["id"]], name
    for caller in (team["dave"], mallory):
        assert contents(search(caller, "when is the launch?")) == []
        assert caller.get(f"/api/v1/memories/{memory['id']}").status_code == 404
        assert caller.get("/api/v1/memories").json()["results"] == []


def test_only_the_author_forgets_it_unless_curating(team: dict[str, Caller]) -> None:
    memory = write(team["alice"])
    assert team["bob"].client.delete(f"/api/v1/memories/{memory['id']}").status_code == 403
    assert team["dave"].client.delete(f"/api/v1/memories/{memory['id']}").status_code == 404  # unseen
    assert team["alice"].client.delete(f"/api/v1/memories/{memory['id']}").status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scope": "hierarchical"}, "visible_to"),
        ({"scope": "hierarchical", "visible_to": {"agents": [], "roles": []}}, "visible_to"),
        ({"scope": "shared", "visible_to": {"agents": ["bob"]}}, "visible_to"),
        ({"scope": "hierarchical", "visible_to": {"agents": "bob"}}, "visible_to.agents"),
        ({"scope": "hierarchical", "visible_to": {"teams": ["x"]}}, "visible_to.teams"),
    ],
)
def test_bad_audiences_are_400_naming_the_field(alice: Caller, bob: Caller, body: dict, field: str) -> None:
    response = alice.post("/api/v1/memories", {"content": "a secret plan", **body})
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]


def test_an_audience_naming_no_agent_is_404_naming_the_field(alice: Caller) -> None:
    """A well-formed name that is no agent of the tenant: the thing referred to is not found."""
    body = {"content": "a secret plan", "scope": "hierarchical", "visible_to": {"agents": ["nobody"]}}
    response = alice.post("/api/v1/memories", body)
    assert response.status_code == 404, response.content
    assert "visible_to.agents" in response.json()["errors"]


def test_a_duplicate_adds_the_new_audience(alice: Caller, bob: Caller) -> None:
    make_caller(alice.tenant, "erin")
    first = write(alice)
    again = remember(
        alice,
        "The launch date moved to the third of March",
        scope="hierarchical",
        visible_to={"agents": ["erin"]},
    ).json()
    assert again["deduplicated"] is True and again["id"] == first["id"]
    assert again["visible_to"] == {"agents": ["bob", "erin"], "roles": ["critic"]}
