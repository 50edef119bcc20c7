"""Retention: the rules per layer and memory type (stored ones over the declared defaults), the dry
run, a pass that removes exactly what the dry run counted and never held data, the trail entries
of rule changes, holds and passes, the admin pages, and the daily job in a real Celery worker."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from django_tenants.utils import tenant_context

from compliance import lifecycle, services, tasks
from compliance.models import LegalHold, RetentionRule, RetentionRun, RunStatus
from memory.checkpoints.models import Checkpoint
from memory.checkpoints.services import checkpoint_save
from memory.episodic.models import Event
from memory.episodic.selectors import chain_verify
from memory.episodic.services import EventData, events_append
from memory.knowledge import services as knowledge
from memory.knowledge.models import Fact
from memory.knowledge.services import FactData, FactObject
from memory.semantic.models import MemoryAccess, SemanticMemory
from tenants.models import Tenant
from tests.compliance.test_worker import officer_client
from tests.factories import Caller, admin_client, requires_model

YEAR = timedelta(days=365)


def old_events(caller: Caller, count: int, *, session_id: str, age: timedelta) -> list[Event]:
    moment = timezone.now() - age
    return events_append(
        agent=caller.agent,
        events=[
            EventData(session_id=session_id, kind="message", content=f"old {i}", occurred_at=moment)
            for i in range(count)
        ],
    )


def aged_memories(caller: Caller, texts: dict[str, tuple[str, int]]) -> dict[str, SemanticMemory]:
    """Memories by ``text: (memory_type, days since last access)``."""
    made = {}
    for text, (memory_type, days) in texts.items():
        response = caller.post("/api/v1/memories", {"content": text, "memory_type": memory_type})
        assert response.status_code == 201, response.content
        made[text] = SemanticMemory.objects.get(pk=response.json()["id"])
        MemoryAccess.objects.filter(pk=made[text].pk).update(
            last_accessed_at=timezone.now() - timedelta(days=days)
        )
    return made


def stream(caller: Caller, session_id: str, ages: list[int]) -> list[Checkpoint]:
    rows = []
    for step, days in enumerate(ages, start=1):
        saved = checkpoint_save(
            agent=caller.agent,
            session_id=session_id,
            step_index=step,
            idempotency_key=f"k{step}",
            state={"step": step},
            plan=[],
            policy=caller.tenant.working_memory_policy,
        ).checkpoint
        Checkpoint.objects.filter(pk=saved.pk).update(created_at=timezone.now() - timedelta(days=days))
        rows.append(saved)
    return rows


@requires_model
def test_a_pass_removes_exactly_what_the_dry_run_counted_and_never_held_data(
    alice: Caller, bob: Caller
) -> None:
    with tenant_context(alice.tenant):
        expired_events = old_events(alice, 3, session_id="s-2018", age=8 * YEAR)
        held_event = old_events(alice, 1, session_id="s-court", age=8 * YEAR)[0]
        young_events = old_events(bob, 2, session_id="s-2024", age=2 * YEAR)
        memories = aged_memories(
            alice,
            {
                "Alice liked the blue mug": ("preference", 100),  # past 90 days: goes
                "The build broke twice": ("observation", 95),  # goes
                "Summary of the week": ("summary", 100),  # kept: summaries get 200 days below
                "Ship on Friday": ("instruction", 10),  # recent: kept
            },
        )
        services.retention_rule_save(
            rule=RetentionRule(layer="semantic", memory_type="summary", keep_days=200), username="olga"
        )
        facts = [
            knowledge.fact_assert(
                agent=alice.agent,
                data=FactData(
                    subject=f"P{i}", predicate="likes", object=FactObject(literal_type="string", value="x")
                ),
            ).fact
            for i in range(3)
        ]
        knowledge.fact_retract(agent=alice.agent, fact_id=facts[0].pk)
        knowledge.fact_retract(agent=alice.agent, fact_id=facts[1].pk)
        Fact.objects.filter(pk=facts[0].pk).update(ended_at=timezone.now() - timedelta(days=400))  # goes
        Fact.objects.filter(pk=facts[1].pk).update(ended_at=timezone.now() - timedelta(days=30))  # kept
        quiet = stream(alice, "s-quiet", [45, 40])  # the session's last checkpoint is 40 days old: goes
        busy = stream(alice, "s-busy", [45, 40]) + stream(bob, "s-busy", [1])  # bob's keeps the session
        services.hold_place(kind="session", value="s-court", reason="case 7", username="olga")

        now = timezone.now()
        preview = lifecycle.retention_preview(now=now)
        assert preview == {
            "episodic": 3,
            "semantic": 2,
            "knowledge": 1,
            "checkpoints": 2,
            "summaries": 0,
            "extractions": 0,
            "procedural": 0,
            "store": None,
            "working": None,
        }
        run = services.retention_run_start(requested_by="job:retention")
        run = services.retention_run(run_id=run.pk, now=now, batch=2)  # several batches per layer
        assert run.status == RunStatus.DONE, run.error
        assert run.removed == {name: n for name, n in preview.items() if n}
        assert lifecycle.retention_preview(now=now) == {
            "episodic": 0,
            "semantic": 0,
            "knowledge": 0,
            "checkpoints": 0,
            "summaries": 0,
            "extractions": 0,
            "procedural": 0,
            "store": None,
            "working": None,
        }

        assert set(Event.objects.filter(redacted_at__isnull=False).values_list("pk", flat=True)) == {
            e.pk for e in expired_events
        }
        assert Event.objects.get(pk=held_event.pk).content == "old 0"
        assert all(Event.objects.get(pk=e.pk).content.startswith("old") for e in young_events)
        left = set(SemanticMemory.objects.values_list("content", flat=True))
        assert left == {"Summary of the week", "Ship on Friday"}
        assert (
            not MemoryAccess.objects.filter(memory_id__in=[m.pk for m in memories.values()])
            .exclude(memory__content__in=left)
            .exists()
        )
        assert set(Fact.objects.values_list("pk", flat=True)) == {facts[1].pk, facts[2].pk}
        assert not Checkpoint.objects.filter(pk__in=[c.pk for c in quiet]).exists()
        assert Checkpoint.objects.filter(pk__in=[c.pk for c in busy]).count() == 3

        report = chain_verify()
        assert report.ok and report.redacted == 3
        purge = Event.objects.get(payload_index__action="retention_purge")
        assert purge.actor == "job:retention" and purge.payload["removed"]["episodic"] == 3
        assert purge.payload["removed"]["semantic"] == 2
        rule = Event.objects.get(payload_index__action="retention_rule_create")
        assert rule.actor == "user:olga" and rule.payload["keep_days"] == 200


def test_a_tenant_wide_hold_stops_every_purge(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        old_events(alice, 2, session_id="s-old", age=8 * YEAR)
        services.hold_place(kind="tenant", value="", reason="regulator inquiry", username="olga")
        assert lifecycle.retention_preview(now=timezone.now())["episodic"] is None
        run = services.retention_run(run_id=services.retention_run_start(requested_by="job:retention").pk)
        assert run.removed == {} and not Event.objects.filter(redacted_at__isnull=False).exists()


def test_rules_override_defaults_per_layer_and_type(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        defaults = {(r.layer, r.kind): r.days for r in lifecycle.rules_in_effect()}
        assert defaults[("episodic", "")] == 7 * 365 and defaults[("knowledge", "")] == 365
        assert defaults[("semantic", "summary")] == 90 and defaults[("checkpoints", "")] == 30
        assert defaults[("working", "")] is None
        services.retention_rule_save(rule=RetentionRule(layer="semantic", keep_days=60), username="olga")
        services.retention_rule_save(
            rule=RetentionRule(layer="semantic", memory_type="fact", keep_days=30), username="olga"
        )
        rules = {(r.layer, r.kind): (r.days, r.stored) for r in lifecycle.rules_in_effect()}
        assert rules[("semantic", "fact")] == (30, True) and rules[("semantic", "summary")] == (60, True)
        assert rules[("episodic", "")] == (7 * 365, False)
        from core.errors import InvalidInput

        for bad, field in (
            (RetentionRule(layer="nowhere", keep_days=1), "layer"),
            (RetentionRule(layer="summaries", keep_days=1), "layer"),  # kept like their sources
            (RetentionRule(layer="episodic", memory_type="fact", keep_days=1), "memory_type"),
            (RetentionRule(layer="working", keep_days=1), "layer"),
        ):
            try:
                services.retention_rule_save(rule=bad, username="olga")
            except InvalidInput as error:
                assert error.field == field
            else:
                raise AssertionError(f"{bad} was saved")


def test_officers_edit_rules_and_holds_in_the_admin_and_see_the_dry_run(
    alice: Caller, mallory: Caller
) -> None:
    olga = admin_client(alice.tenant, "olga", group="compliance officer")
    with tenant_context(alice.tenant):
        old_events(alice, 2, session_id="s-old", age=8 * YEAR)
    page = olga.get("/admin/compliance/retentionrule/dry-run/").content.decode()
    assert 'class="layer-episodic"' in page and '<td class="count">2</td>' in page and "by TTL" in page
    added = olga.post(
        "/admin/compliance/retentionrule/add/", {"layer": "episodic", "memory_type": "", "keep_days": "3650"}
    )
    assert added.status_code == 302, added.content.decode()
    page = olga.get("/admin/compliance/retentionrule/dry-run/").content.decode()
    assert '<td class="count">0</td>' in page and "3650 days" in page
    held = olga.post(
        "/admin/compliance/legalhold/add/", {"kind": "agent", "value": "alice", "reason": "audit"}
    )
    assert held.status_code == 302
    missing = olga.post("/admin/compliance/legalhold/add/", {"kind": "agent", "value": "", "reason": "x"})
    assert missing.status_code == 200 and "Name what the hold is on" in missing.content.decode()
    with tenant_context(alice.tenant):
        hold = LegalHold.objects.get()
    # placed without four eyes: its release takes one officer, with a reason
    released = olga.post(
        f"/admin/compliance/legalhold/{hold.pk}/release/", {"step": "request", "reason": "audit done"}
    )
    assert released.status_code == 302
    with tenant_context(alice.tenant):
        hold.refresh_from_db()
        assert hold.released_by == "user:olga" and hold.release_reason == "audit done"
        actions = list(
            Event.objects.filter(actor="user:olga").values_list("payload_index__action", flat=True)
        )
    assert {"retention_rule_create", "legal_hold_place", "legal_hold_release"} <= set(actions)
    nobody = admin_client(alice.tenant, "nobody")
    assert nobody.get("/admin/compliance/retentionrule/dry-run/").status_code == 403
    # another tenant's officer sees only that tenant: its rules, holds and counts
    outsider = admin_client(mallory.tenant, "beta-officer", group="compliance officer")
    page = outsider.get("/admin/compliance/retentionrule/dry-run/").content.decode()
    assert "3650 days" not in page and "2555 days (default)" in page
    assert "audit" not in outsider.get("/admin/compliance/legalhold/").content.decode()


def test_the_daily_job_applies_retention_in_the_worker(celery_worker, scratch_tenant: Tenant) -> None:  # type: ignore[no-untyped-def]
    from agents.services import agent_create

    officer_client(scratch_tenant)  # the tenant's system agent and an officer exist
    with tenant_context(scratch_tenant):
        agent = agent_create(by=None, name="archivist")
        caller = Caller(scratch_tenant, agent, "", None)  # type: ignore[arg-type]
        old_events(caller, 4, session_id="s-2017", age=9 * YEAR)
        old_events(caller, 2, session_id="s-now", age=timedelta(0))
        assert tasks.retention_daily.delay().get(timeout=120) == {"episodic": 4}
        assert RetentionRun.objects.get().status == RunStatus.DONE
        assert Event.objects.filter(redacted_at__isnull=False).count() == 4
        assert chain_verify().redacted == 4
        assert tasks.retention_daily.delay().get(timeout=120) == {}  # nothing more to do
