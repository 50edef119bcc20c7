"""Tampering drills: each way of falsifying the trail behind the triggers' back is detected by
``verify_chain`` (the command and the check the admin runs), named for what it is, and shown red in
the admin's integrity panel. Real PostgreSQL; anchors signed with the test key."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django_tenants.utils import tenant_context

from compliance import services
from compliance.models import Anchor, CheckStatus
from memory.episodic.models import Event, body_digest, chain_hash
from memory.episodic.selectors import FindingKind
from tests.compliance.conftest import append, behind_the_triggers
from tests.factories import Caller, admin_client


def kinds(check) -> list[str]:  # type: ignore[no-untyped-def]
    return [f["kind"] for f in check.findings]


def verify() -> object:
    check = services.chain_check_request(requested_by="user:tester")
    return services.chain_check_run(check_id=check.pk, chunk_size=4)  # small chunks: the keyset pages too


def command_output(tenant: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("verify_chain", tenant=tenant, stdout=out)
    except SystemExit as exit_info:
        return int(exit_info.code or 0), out.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def ten(alice: Caller) -> Caller:
    with tenant_context(alice.tenant):
        append(alice.agent, 10)
    return alice


def test_an_honest_chain_with_anchors_is_intact(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        anchor = services.anchor_head()
        assert anchor is not None and anchor.seq == 10
        assert services.anchor_head() is None  # the head did not move: nothing new to sign
        check = verify()
    assert check.status == CheckStatus.INTACT, check.findings
    assert (check.checked, check.head_seq, check.anchors_checked) == (10, 10, 1)
    assert command_output("alpha") == (0, "chain intact: 10 events verified, 1 anchors checked\n")


def test_altered_content_is_named(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute("UPDATE memory_event SET content = 'forged' WHERE seq = 7")
        check = verify()
    assert check.status == CheckStatus.BROKEN
    assert kinds(check) == [FindingKind.CONTENT_ALTERED]
    assert check.findings[0]["seq"] == 7
    code, out = command_output("alpha")
    assert code == 1 and "BROKEN at event #7" in out and "content_altered" in out


def test_an_altered_payload_is_content(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute("""UPDATE memory_event SET payload_json = '{"n":99}' WHERE seq = 2""")
        assert kinds(verify()) == [FindingKind.CONTENT_ALTERED]


def test_altered_fields_are_named(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute("UPDATE memory_event SET session_id = 'elsewhere' WHERE seq = 4")
            cursor.execute("UPDATE memory_event SET actor = 'user:mallory' WHERE seq = 8")
        check = verify()
    assert kinds(check) == [FindingKind.FIELDS_ALTERED, FindingKind.FIELDS_ALTERED]
    assert [f["seq"] for f in check.findings] == [4, 8]


def test_a_deleted_middle_row_is_a_gap(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute("DELETE FROM memory_event WHERE seq = 5")
        check = verify()
    assert kinds(check) == [FindingKind.GAP]
    assert "#5 were deleted" in check.findings[0]["message"]


def test_deleted_last_rows_are_truncation_by_the_head(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute("DELETE FROM memory_event WHERE seq > 8")
        check = verify()
    assert kinds(check) == [FindingKind.TRUNCATED]
    assert "chain head says #10, the log ends at #8" in check.findings[0]["message"]


def test_deleted_last_rows_with_the_head_rolled_back_are_caught_by_the_anchor(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        services.anchor_head()
        eighth = Event.objects.get(seq=8).hash
        with behind_the_triggers() as cursor:
            cursor.execute("DELETE FROM memory_event WHERE seq > 8")
            cursor.execute("UPDATE memory_chainhead SET last_seq = 8, last_hash = %s", [eighth])
        check = verify()
    assert kinds(check) == [FindingKind.TRUNCATED]
    assert (
        "an anchor signed at" in check.findings[0]["message"]
        and "says #10 existed" in check.findings[0]["message"]
    )


def test_reordered_rows_are_named(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute("UPDATE memory_event SET seq = -3 WHERE seq = 3")
            cursor.execute("UPDATE memory_event SET seq = 3 WHERE seq = 6")
            cursor.execute("UPDATE memory_event SET seq = 6 WHERE seq = -3")
        check = verify()
    assert check.status == CheckStatus.BROKEN
    assert set(kinds(check)) == {FindingKind.REORDERED}
    assert "#3 was chained after #5; its hash verifies at #6" in check.findings[0]["message"]


def _recompute(cursor, seq: int, content: str | None = None) -> None:  # type: ignore[no-untyped-def]
    """Rewrite event ``seq`` (optionally with new content) with a digest and hash that verify,
    linked to the row before it as it now is: a forger who knows the chain format."""
    event = Event.objects.get(seq=seq)
    if content is not None:
        event.content = content
    event.prev_hash = Event.objects.get(seq=seq - 1).hash
    event.body_digest = body_digest(
        salt=event.body_salt, content=event.content, payload_json=event.payload_json
    )
    event.hash = chain_hash(
        seq=seq, prev_hash=event.prev_hash, header=event.hashed_header(), digest=event.body_digest
    )
    cursor.execute(
        "UPDATE memory_event SET content = %s, prev_hash = %s, body_digest = %s, hash = %s WHERE seq = %s",
        [event.content, event.prev_hash, event.body_digest, event.hash, seq],
    )


def test_a_recomputed_row_in_the_middle_is_rewritten(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        with behind_the_triggers() as cursor:
            _recompute(cursor, 5, "the forger's version")
        check = verify()
    assert kinds(check) == [FindingKind.REWRITTEN]
    assert check.findings[0]["seq"] == 5


def test_a_tail_rewritten_with_recomputed_hashes_is_caught_by_the_anchor(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        services.anchor_head()
        with behind_the_triggers() as cursor:
            _recompute(cursor, 9, "rewritten after the anchor")
            _recompute(cursor, 10)
            cursor.execute(
                "UPDATE memory_chainhead SET last_hash = (SELECT hash FROM memory_event WHERE seq = 10)"
            )
        check = verify()
    assert kinds(check) == [FindingKind.ANCHOR_MISMATCH]
    assert "#10 is not the one anchored" in check.findings[0]["message"]


def test_a_forged_anchor_is_named(ten: Caller) -> None:
    with tenant_context(ten.tenant):
        real = services.anchor_head()
        assert real is not None
        Anchor.objects.create(
            seq=real.seq,
            hash="f" * 64,
            anchored_at=real.anchored_at,
            key_id=real.key_id,
            statement=real.statement.replace(real.hash, "f" * 64),
            signature=real.signature,
        )
        check = verify()
    assert kinds(check) == [FindingKind.ANCHOR_SIGNATURE]


def test_anchors_are_append_only(ten: Caller) -> None:
    from django.db import DatabaseError, transaction

    with tenant_context(ten.tenant):
        anchor = services.anchor_head()
        assert anchor is not None
        for statement in ("UPDATE compliance_anchor SET seq = 1", "DELETE FROM compliance_anchor"):
            with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
                from django.db import connection

                with connection.cursor() as cursor:
                    cursor.execute(statement)


def test_a_broken_chain_is_red_in_the_status_panel_with_the_first_broken_link(ten: Caller) -> None:
    officer = admin_client(ten.tenant, "officer", group="compliance officer")
    with tenant_context(ten.tenant):
        assert verify().status == CheckStatus.INTACT
    page = officer.get("/admin/").content.decode()
    assert "Trail intact" in page and "Chain intact up to #" in page and "engram-integrity is-intact" in page
    with tenant_context(ten.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute("DELETE FROM memory_event WHERE seq = 4")
        verify()
    page = officer.get("/admin/").content.decode()
    assert "Trail BROKEN" in page and "engram-integrity is-broken" in page
    assert "first broken link at #5" in page and "events #4 were deleted" in page


def test_the_sink_file_keeps_anchors_the_database_lost(ten: Caller, tmp_path, settings) -> None:  # type: ignore[no-untyped-def]
    sink = tmp_path / "anchors.jsonl"
    settings.ENGRAM = {**settings.ENGRAM, "ANCHOR_SINK": str(sink)}
    with tenant_context(ten.tenant):
        anchor = services.anchor_head()
        assert anchor is not None and anchor.sink == str(sink) and anchor.sink_error == ""
        eighth = Event.objects.get(seq=8).hash
        with behind_the_triggers() as cursor:  # the attacker also deletes the anchors they can reach
            cursor.execute("DELETE FROM compliance_anchor")
            cursor.execute("DELETE FROM memory_event WHERE seq > 8")
            cursor.execute("UPDATE memory_chainhead SET last_seq = 8, last_hash = %s", [eighth])
        # nothing in the database contradicts it any more; the check reads the sink file too
        assert kinds(verify()) == [FindingKind.TRUNCATED]
    assert command_output("alpha")[0] == 0  # the command alone sees only the database
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("verify_chain", tenant="alpha", anchors_file=str(sink), stdout=out)
    assert "truncated" in out.getvalue() and "says #10 existed" in out.getvalue()
