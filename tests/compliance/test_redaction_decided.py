"""Every redaction is accounted for (issue 28, item 3): a retention pass or an erasure records, in
the trail and signed, the events each of its batches redacts, and the redaction points at that
decision. The tenant's own database role cannot redact without such a decision (the trigger), and a
redaction that no signed decision names, done behind the trigger's back or through a decision the
role appended itself, is named by the chain check."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from django_tenants.utils import tenant_context

from agents.services import system_agent_get
from compliance import lifecycle, services
from compliance.models import CheckStatus, ErasureRequest
from core.tenancy import tenant_role
from memory.episodic.models import Event, EventKind
from memory.episodic.selectors import FindingKind
from memory.episodic.services import EventData, decision_record, events_append
from tests.compliance.conftest import append, behind_the_triggers
from tests.factories import Caller

# what ``events_redact`` writes: the body goes, the chained fields stay
REDACT = (
    "UPDATE memory_event SET content = '', payload_json = '{}', body_salt = '', data_subject = '', "
    "redacted_at = now() WHERE seq = %s"
)


def verify():  # type: ignore[no-untyped-def]
    check = services.chain_check_request(requested_by="user:tester")
    return services.chain_check_run(check_id=check.pk, chunk_size=4)


def kinds(check) -> list[str]:  # type: ignore[no-untyped-def]
    return [f["kind"] for f in check.findings]


@pytest.fixture
def ten(alice: Caller) -> Caller:
    with tenant_context(alice.tenant):
        append(alice.agent, 10)
    return alice


def test_the_tenant_role_cannot_redact_without_a_decision(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user")
            assert cursor.fetchone()[0] == tenant_role("alpha")  # the application's own role
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(REDACT, [5])
        assert Event.objects.get(seq=5).content == "turn 4"
        assert verify().status == CheckStatus.INTACT


def test_a_redaction_behind_the_triggers_back_is_named(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute(REDACT, [5])
        check = verify()
    assert check.status == CheckStatus.BROKEN
    assert kinds(check) == [FindingKind.REDACTION_UNDECIDED]
    assert check.findings[0]["seq"] == 5
    assert "no decision" in check.findings[0]["message"]
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("verify_chain", tenant="alpha", stdout=out)
    assert "BROKEN at event #5" in out.getvalue() and "redaction_undecided" in out.getvalue()


def test_a_redaction_through_a_decision_the_role_appended_itself_is_named(ten: Caller) -> None:
    """Whoever holds the application's credentials can append to the trail, but cannot sign."""
    with tenant_context(ten.tenant):
        forged = decision_record(
            agent=system_agent_get(),
            session_id="compliance:lifecycle",
            actor="job:retention",
            content="Retention redacted 1 event: #5.",
            payload={"action": "events_redact", "redacts": [[5, 5]], "count": 1, "signature": "00" * 64},
        )
        with connection.cursor() as cursor:  # the tenant role, through the trigger
            cursor.execute(REDACT.replace("now()", "now(), redacted_by = %s"), [forged.seq, 5])
        check = verify()
    assert check.status == CheckStatus.BROKEN
    assert kinds(check) == [FindingKind.REDACTION_UNSIGNED]
    assert check.findings[0]["seq"] == 5 and f"#{forged.seq}" in check.findings[0]["message"]


def test_a_redaction_must_point_at_a_decision_that_names_it(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        other = decision_record(
            agent=system_agent_get(),
            session_id="compliance:lifecycle",
            actor="job:retention",
            content="Retention redacted 1 event: #3.",
            payload={"action": "events_redact", "redacts": [[3, 3]], "count": 1},
        )
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(REDACT.replace("now()", "now(), redacted_by = %s"), [other.seq, 5])


def test_retention_names_every_event_it_redacts_in_signed_decisions(alice: Caller, settings) -> None:  # type: ignore[no-untyped-def]
    settings.ENGRAM = {**settings.ENGRAM, "LIFECYCLE_BATCH": 2}
    with tenant_context(alice.tenant):
        moment = timezone.now() - timedelta(days=8 * 365)
        old = events_append(
            agent=alice.agent,
            events=[
                EventData(session_id="s-2018", kind=EventKind.MESSAGE, content=f"old {i}", occurred_at=moment)
                for i in range(5)
            ],
        )
        append(alice.agent, 2)
        run = services.retention_run(run_id=services.retention_run_start(requested_by="job:retention").pk)
        assert run.removed["episodic"] == 5
        decisions = list(
            Event.objects.filter(kind=EventKind.DECISION, payload_index__action="events_redact").order_by(
                "seq"
            )
        )
        assert len(decisions) == 3  # one per batch of 2
        named = [seq for d in decisions for lo, hi in d.payload["redacts"] for seq in range(lo, hi + 1)]
        assert named == [e.seq for e in old]
        assert all(d.actor == "job:retention" and d.payload["retention_run"] == run.pk for d in decisions)
        assert all(d.payload["signature"] and d.payload["key_id"] for d in decisions)
        by_decision = {
            seq: d.seq for d in decisions for lo, hi in d.payload["redacts"] for seq in range(lo, hi + 1)
        }
        redacted = Event.objects.filter(redacted_at__isnull=False)
        assert {e.seq: e.redacted_by for e in redacted} == by_decision
        check = verify()
        assert check.status == CheckStatus.INTACT, check.findings
        assert check.redacted == 5
        # a decision that accounts for redactions is kept: retention never redacts it
        assert lifecycle.layer_get("episodic").rows().filter(pk__in=[d.pk for d in decisions]).count() == 0
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(
                    REDACT.replace("now()", "now(), redacted_by = %s"), [decisions[-1].seq, decisions[0].seq]
                )


def test_an_erasure_names_the_events_it_redacts(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        append(ten.agent, 2, session_id="s-gone")
        # an agent's own decision: no "action" in its payload, redacted like any event of the session
        decision_record(agent=ten.agent, session_id="s-gone", content="chose plan B", payload={"plan": "B"})
        request = services.erasure_request(
            kind="session", value="s-gone", legal_basis="GDPR Art. 17", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="ivan")
        done = services.erasure_run(request_id=request.pk)
        assert done.status == "done", done.error
        gone = list(Event.objects.filter(session_id="s-gone").order_by("seq"))
        decision = Event.objects.get(seq=gone[0].redacted_by)
        assert decision.actor == "job:erasure" and decision.payload["erasure_id"] == str(request.pk)
        assert decision.payload["redacts"] == [[gone[0].seq, gone[-1].seq]]
        assert {e.redacted_by for e in gone} == {decision.seq}
        receipt = json.loads(ErasureRequest.objects.get(pk=request.pk).receipt)
        assert receipt["stores"]["postgres"]["event_seqs"] == [e.seq for e in gone]
        check = verify()
    assert check.status == CheckStatus.INTACT, check.findings
    assert check.redacted == 3


def test_redactions_from_before_decisions_named_them_are_accounted_for_by_the_migration(ten: Caller) -> None:
    import importlib
    from types import SimpleNamespace

    from django.apps import apps

    migration = importlib.import_module("memory.migrations.0026_event_redacted_by")
    with tenant_context(ten.tenant):
        with behind_the_triggers() as cursor:  # as 0015's trigger let them through: no decision
            cursor.execute(REDACT, [3])
            cursor.execute(REDACT, [4])
            cursor.execute(REDACT, [8])
        assert kinds(verify()) == [FindingKind.REDACTION_UNDECIDED] * 3
        with behind_the_triggers():  # the migration runs as the tables' owner, the trigger off
            migration.account_legacy_redactions(apps, SimpleNamespace(connection=connection))
        legacy = Event.objects.get(seq=11)
        assert (legacy.actor, legacy.payload["redacts"], legacy.payload["legacy"]) == (
            "job:migration",
            [[3, 4], [8, 8]],
            True,
        )
        assert set(Event.objects.filter(redacted_at__isnull=False).values_list("redacted_by", flat=True)) == {
            11
        }
        check = verify()
        assert check.status == CheckStatus.INTACT, check.findings
        assert check.redacted == 3
        # nobody else may point a redaction at the legacy account
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(REDACT.replace("now()", "now(), redacted_by = 11"), [5])
