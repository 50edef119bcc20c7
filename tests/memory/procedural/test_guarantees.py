"""What the database guarantees for procedural memory, tried with raw SQL and two real connections:
published versions and tool versions cannot be changed, one version per skill is published even
under concurrent publishes, rollback, stale draft saves, and the trail of each decision."""

from __future__ import annotations

import threading

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django_tenants.utils import tenant_context

from core.errors import Conflict, DomainError, InvalidInput
from memory.episodic.models import Event, EventKind
from memory.procedural.models import SkillVersion, ToolVersion, VersionStatus
from memory.procedural.services.common import Actor
from memory.procedural.services.versions import draft_create, draft_save, version_publish, version_retire
from tenants.models import Tenant
from tests.factories import (
    PASSWORD_RESET_STEPS,
    Caller,
    make_caller,
    requires_model,
    skill_publish,
    skill_seed,
)

pytestmark = requires_model

OPERATOR = Actor(username="op")


def published_id(tenant: Tenant) -> int:
    with tenant_context(tenant):
        return SkillVersion.objects.get(skill__name="reset-password", status=VersionStatus.PUBLISHED).pk


def raw(sql: str, params: list[object]) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("UPDATE memory_skillversion SET steps = '[]'::jsonb WHERE id = %s", "immutable"),
        ("UPDATE memory_skillversion SET change_note = 'edited later' WHERE id = %s", "immutable"),
        ("UPDATE memory_skillversion SET tool_versions = '{}'::jsonb WHERE id = %s", "immutable"),
        ("UPDATE memory_skillversion SET number = 7 WHERE id = %s", "immutable"),
        ("UPDATE memory_skillversion SET status = 'draft' WHERE id = %s", "cannot become a draft"),
        ("DELETE FROM memory_skillversion WHERE id = %s", "cannot be deleted"),
    ],
)
def test_a_published_version_cannot_be_changed_by_raw_sql(alice: Caller, sql: str, words: str) -> None:
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    pk = published_id(alice.tenant)
    with tenant_context(alice.tenant):
        with pytest.raises(DatabaseError, match=words):
            raw(sql, [pk])
        assert SkillVersion.objects.get(pk=pk).steps == PASSWORD_RESET_STEPS


def test_status_changes_are_what_a_published_version_allows(alice: Caller) -> None:
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    pk = published_id(alice.tenant)
    with tenant_context(alice.tenant):
        raw("UPDATE memory_skillversion SET status = 'retired', retired_at = now() WHERE id = %s", [pk])
        assert SkillVersion.objects.get(pk=pk).status == VersionStatus.RETIRED
        raw("UPDATE memory_skillversion SET status = 'published', retired_at = NULL WHERE id = %s", [pk])
        assert SkillVersion.objects.get(pk=pk).status == VersionStatus.PUBLISHED


def test_a_draft_can_be_edited_and_deleted(alice: Caller) -> None:
    skill_seed(alice)
    with tenant_context(alice.tenant):
        pk = SkillVersion.objects.get().pk
        raw("UPDATE memory_skillversion SET change_note = 'still a draft' WHERE id = %s", [pk])
        raw("DELETE FROM memory_skillversion WHERE id = %s", [pk])
        assert not SkillVersion.objects.exists()


def test_tool_versions_cannot_be_changed_or_deleted(alice: Caller) -> None:
    skill_seed(alice)
    with tenant_context(alice.tenant):
        pk = ToolVersion.objects.get(tool__name="send_email").pk
        for sql in (
            "UPDATE memory_toolversion SET input_schema = '{}'::jsonb WHERE id = %s",
            "DELETE FROM memory_toolversion WHERE id = %s",
        ):
            with pytest.raises(DatabaseError, match="tool versions are immutable"):
                raw(sql, [pk])


def test_the_database_refuses_a_second_published_version(alice: Caller) -> None:
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    with tenant_context(alice.tenant):
        draft = draft_create(actor=OPERATOR, name="reset-password", from_number=1)
        with pytest.raises(IntegrityError, match="skillversion_one_published"):
            raw("UPDATE memory_skillversion SET status = 'published' WHERE id = %s", [draft.pk])


def test_publishing_needs_a_draft_that_compiles(alice: Caller) -> None:
    skill_seed(alice)
    with tenant_context(alice.tenant):
        draft = SkillVersion.objects.get()
        broken = [*PASSWORD_RESET_STEPS, {"id": "extra", "tool": "nope"}]
        draft_save(
            actor=OPERATOR, name="reset-password", number=1, revision=draft.revision, steps=broken,
            input_schema=draft.input_schema, change_note="",
        )  # fmt: skip
        with pytest.raises(InvalidInput) as refused:
            version_publish(username="op", name="reset-password", number=1, expected_published=None)
        assert refused.value.errors == {
            "steps[5].tool": ["Step 'extra' (#6): No tool 'nope' in this tenant."]
        }
        assert SkillVersion.objects.get().status == VersionStatus.DRAFT


def test_publish_then_rollback_recorded_with_both_versions_and_the_diff_size(alice: Caller) -> None:
    skill_seed(alice)
    with tenant_context(alice.tenant):
        version_publish(username="op", name="reset-password", number=1, expected_published=None)
        v2 = draft_create(actor=OPERATOR, name="reset-password", from_number=1)
        draft_save(
            actor=OPERATOR, name="reset-password", number=2, revision=v2.revision, steps=PASSWORD_RESET_STEPS[:4],
            input_schema=v2.input_schema, change_note="no follow-up",
        )  # fmt: skip
        version_publish(username="op", name="reset-password", number=2, expected_published=1)
        version_publish(username="op", name="reset-password", number=1, expected_published=2)
        states = dict(SkillVersion.objects.values_list("number", "status"))
        assert states == {1: "published", 2: "retired"}
        trail = list(
            Event.objects.filter(kind=EventKind.DECISION, session_id="skill:reset-password")
            .exclude(payload_index__action__in=["skill_draft_create", "skill_draft_save", "skill_propose"])
            .order_by("seq")
        )
        assert [
            (e.payload["action"], e.payload["from_version"], e.payload["to_version"], e.payload["diff_size"])
            for e in trail
        ] == [
            ("skill_publish", None, 1, 6),
            ("skill_publish", 1, 2, 1),
            ("skill_rollback", 2, 1, 1),
        ]
        assert {(e.actor, e.agent.name) for e in trail} == {("user:op", "engram-system")}


def test_retiring_the_published_version_leaves_the_skill_unmatched_and_a_rejected_draft_cannot_be_rolled_back_to(
    alice: Caller,
) -> None:
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    with tenant_context(alice.tenant):
        version_retire(username="op", name="reset-password", number=1)
        assert alice.get("/api/v1/skills", {"intent": "I forgot my password"}).json()["results"] == []
        draft = draft_create(actor=OPERATOR, name="reset-password", from_number=1)
        version_retire(username="op", name="reset-password", number=draft.number, reason="not needed")
        with pytest.raises(Conflict, match="never published"):
            version_publish(
                username="op", name="reset-password", number=draft.number, expected_published=None
            )
        actions = list(
            Event.objects.filter(payload_index__action__in=["skill_retire", "skill_reject"])
            .order_by("seq")
            .values_list("payload_index__action", flat=True)
        )
        assert actions == ["skill_retire", "skill_reject"]


def test_a_stale_draft_save_is_a_409_naming_the_revision_and_keeps_the_first_save(alice: Caller) -> None:
    skill_seed(alice)
    with tenant_context(alice.tenant):
        opened = SkillVersion.objects.get().revision
        draft_save(
            actor=Actor(username="ann"), name="reset-password", number=1, revision=opened,
            steps=PASSWORD_RESET_STEPS[:3], input_schema=SkillVersion.objects.get().input_schema, change_note="ann's",
        )  # fmt: skip
        with pytest.raises(Conflict) as stale:
            draft_save(
                actor=Actor(username="ben"), name="reset-password", number=1, revision=opened,
                steps=PASSWORD_RESET_STEPS[:2], input_schema={}, change_note="ben's",
            )  # fmt: skip
        assert (stale.value.field, stale.value.extra) == ("revision", {"current_revision": opened + 1})
        saved = SkillVersion.objects.get()
        assert (saved.change_note, len(saved.steps), saved.revision) == ("ann's", 3, opened + 1)


def test_two_concurrent_publishes_exactly_one_wins(scratch_tenant: Tenant) -> None:
    """Two operators, each on their own connection, publish two drafts of the same skill having both
    seen v1 published: one publish wins, the other is refused, and one version is published."""
    caller = make_caller(scratch_tenant, "proposer")
    skill_seed(caller)
    skill_publish(scratch_tenant, "reset-password", 1)
    with tenant_context(scratch_tenant):
        for _ in range(2):
            draft_create(actor=OPERATOR, name="reset-password", from_number=1)
    connection.set_schema_to_public()
    barrier = threading.Barrier(2)
    outcomes: dict[int, str] = {}

    def publish(number: int) -> None:
        try:
            with tenant_context(scratch_tenant):
                barrier.wait()
                try:
                    version_publish(
                        username=f"op{number}", name="reset-password", number=number, expected_published=1
                    )
                    outcomes[number] = "published"
                except DomainError as error:
                    outcomes[number] = type(error).__name__
        finally:
            connection.close()

    threads = [threading.Thread(target=publish, args=(n,)) for n in (2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes.values()) == ["Conflict", "published"], outcomes
    winner = next(n for n, o in outcomes.items() if o == "published")
    with tenant_context(scratch_tenant):
        states = dict(SkillVersion.objects.values_list("number", "status"))
        assert states == {1: "retired", winner: "published", 5 - winner: "draft"}
        assert Event.objects.filter(payload_index__action="skill_publish").count() == 2  # v1, then the winner
