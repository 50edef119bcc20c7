"""What the console says: a retention rule's memory type is chosen from the layers' types and keeping
data 0 days must be confirmed; a rejected skill draft is listed as rejected, not retired."""

from __future__ import annotations

from django_tenants.utils import tenant_context

from compliance.models import RetentionRule
from memory.procedural.services import versions as procedural
from tests.factories import Caller, admin_client, requires_model, skill_seed

ADD = "/admin/compliance/retentionrule/add/"


def test_a_retention_rule_chooses_its_memory_type_and_confirms_zero_days(alice: Caller) -> None:
    olga = admin_client(alice.tenant, "olga", group="compliance officer")
    form = olga.get(ADD).content.decode()
    assert '<select name="memory_type"' in form and '<optgroup label="semantic memories">' in form
    unknown = olga.post(ADD, {"layer": "semantic", "memory_type": "nonsense", "keep_days": "30"})
    assert unknown.status_code == 200 and "Select a valid choice" in unknown.content.decode()

    zero = {"layer": "semantic", "memory_type": AGENT_TYPE, "keep_days": "0"}
    refused = olga.post(ADD, zero)
    assert (
        refused.status_code == 200
        and "removes all of it at the next retention run" in refused.content.decode()
    )
    with tenant_context(alice.tenant):
        assert not RetentionRule.objects.exists()
    assert olga.post(ADD, {**zero, "confirm_zero": "on"}).status_code == 302
    with tenant_context(alice.tenant):
        assert RetentionRule.objects.get().keep_days == 0


AGENT_TYPE = "observation"


@requires_model
def test_a_rejected_proposal_is_listed_as_rejected(alice: Caller) -> None:
    skill_seed(alice)  # the agent's proposal: draft v1
    operator = admin_client(alice.tenant, "oscar", group="operator")
    with tenant_context(alice.tenant):
        procedural.version_retire(username="oscar", name="reset-password", number=1, reason="not needed")
    listed = operator.get("/admin/memory/skillversion/").content.decode()
    assert '<td class="field-state">Rejected</td>' in listed
    assert '<td class="field-state">Retired</td>' not in listed
    with tenant_context(alice.tenant):
        from memory.procedural.models import Skill

        skill_id = Skill.objects.get(name="reset-password").pk
    page = operator.get(f"/admin/memory/skill/{skill_id}/versions/1/").content.decode()
    assert 'id="version-status">rejected</span>' in page
    table = operator.get(f"/admin/memory/skill/{skill_id}/change/").content.decode()
    assert ">rejected</span>" in table and ">retired</span>" not in table


@requires_model
def test_the_skill_tag_filter_offers_each_tag_as_text(alice: Caller) -> None:
    skill_seed(alice)  # tags ["accounts", "support"]
    operator = admin_client(alice.tenant, "oscar", group="operator")
    listed = operator.get("/admin/memory/skill/").content.decode()
    assert 'href="?tag=accounts"' in listed and 'href="?tag=support"' in listed
    assert "[&#x27;accounts&#x27;" not in listed and "['accounts'" not in listed
    assert "reset-password" in operator.get("/admin/memory/skill/?tag=support").content.decode()
    assert "reset-password" not in operator.get("/admin/memory/skill/?tag=billing").content.decode()
