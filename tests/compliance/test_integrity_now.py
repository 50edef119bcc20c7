"""The console shows what is true now (issue 28, item 10): the integrity panel states the head, what
the last check covered and when, and never says "intact" for events no check has covered; scheduled
checks verify new events and re-verify older ones in rotation, so an altered old row is named
within the stated bound; events named by the latest finding are marked wherever they are shown and
linked from it; anchors are counted once however many copies were read."""

from __future__ import annotations

import math
import re

import pytest
from django.conf import settings as django_settings
from django_tenants.utils import tenant_context

from compliance import services
from compliance.models import ChainCheck, CheckStatus
from memory.episodic.models import Event
from memory.episodic.selectors import FindingKind
from tests.compliance.conftest import append, behind_the_triggers
from tests.factories import Caller, admin_client


def verify():  # type: ignore[no-untyped-def]
    check = services.chain_check_request(requested_by="user:tester")
    return services.chain_check_run(check_id=check.pk, chunk_size=4)


def panel(client) -> str:  # type: ignore[no-untyped-def]
    html = client.get("/admin/").content.decode()
    start = html.index('<section id="integrity-panel"')
    return re.sub(r"\s+", " ", html[start : html.index("</section>", start)])


@pytest.fixture
def ten(alice: Caller) -> Caller:
    with tenant_context(alice.tenant):
        append(alice.agent, 10)
    return alice


@pytest.fixture
def rotation(settings):  # type: ignore[no-untyped-def]
    """Checks every 60 s, every old event re-verified within 300 s: windows of a fifth of the log."""
    settings.ENGRAM = {
        **settings.ENGRAM,
        "CHAIN_CHECK_SECONDS": 60,
        "CHAIN_RECHECK_SECONDS": 300,
        "CHAIN_RECHECK_MIN_ROWS": 2,
    }
    return 300 // 60


def test_the_panel_never_says_intact_for_events_no_check_covered(ten: Caller) -> None:
    officer = admin_client(ten.tenant, "officer", group="compliance officer")
    with tenant_context(ten.tenant):
        check = verify()
        covered = check.head_seq
        append(ten.agent, 5)
    text = panel(officer)
    assert f'id="integrity-title"> Trail intact up to #{covered} </h2>' in text, text
    assert f"Head: #{covered + 5}" in text
    assert f"Events #{covered + 1}-#{covered + 5} are not verified yet" in text
    assert f"Chain intact up to #{covered}, verified at {check.finished_at:%Y-%m-%d %H:%M:%S} UTC" in text
    assert f"Last check: full, by user:tester, finished {check.finished_at:%Y-%m-%d %H:%M:%S} UTC" in text
    assert "No scheduled check has finished lately" in text  # no worker, no beat: said so
    with tenant_context(ten.tenant):
        verify()
    text = panel(officer)
    assert 'id="integrity-title"> Trail intact </h2>' in text and "not verified yet" not in text


def test_scheduled_checks_cover_new_events_and_name_an_altered_old_one_within_the_bound(
    ten: Caller, rotation: int
) -> None:
    officer = admin_client(ten.tenant, "officer", group="compliance officer")
    with tenant_context(ten.tenant):
        first = services.chain_check_scheduled()
        assert first is not None and first.status == CheckStatus.INTACT
        assert (first.scope, first.from_seq, first.recheck_from) == ("full", 1, None)  # nothing to build on
        covered = first.head_seq
        append(ten.agent, 5)
        second = services.chain_check_scheduled()
        assert second is not None and second.status == CheckStatus.INTACT, second.findings
        assert (second.scope, second.from_seq, second.head_seq) == ("incremental", covered + 1, covered + 5)
        window = max(2, math.ceil((covered + 5) / rotation))  # a share of the log as it is now
        assert (second.recheck_from, second.recheck_to) == (1, window)
        assert second.checked == 5 + window + 1  # the new rows, the window and the row after it
        text = panel(officer)
        assert "Last check: incremental, by job:scheduled-verify" in text
        assert f"new events #{covered + 1}-#{covered + 5}, re-verified #1-#{window}" in text
        assert "every event is re-verified at least every 5 minutes" in text

        with behind_the_triggers() as cursor:
            cursor.execute("UPDATE memory_event SET content = 'forged' WHERE seq = 9")
        named_after = None
        for run in range(1, rotation + 2):
            check = services.chain_check_scheduled()
            assert check is not None
            if check.status == CheckStatus.BROKEN:
                named_after = run
                break
        assert named_after is not None and named_after <= rotation, named_after
        assert [f["seq"] for f in check.findings] == [9]
        # once broken, the next scheduled check is a full one: the finding stays until it is gone
        again = services.chain_check_scheduled()
        assert again is not None and again.scope == "full" and again.status == CheckStatus.BROKEN
    assert "Trail BROKEN" in panel(officer)


def test_a_scheduled_check_waits_for_one_still_running(ten: Caller, rotation: int) -> None:
    with tenant_context(ten.tenant):
        ChainCheck.objects.create(requested_by="job:scheduled-verify", status=CheckStatus.RUNNING)
        assert services.chain_check_scheduled() is None


def test_beat_runs_the_scheduled_check_every_tenant_at_the_configured_interval() -> None:
    entry = django_settings.CELERY_BEAT_SCHEDULE["verify-chains-incrementally"]
    assert entry["args"] == ["compliance.tasks.chain_check_scheduled"]
    assert entry["schedule"] == django_settings.ENGRAM["CHAIN_CHECK_SECONDS"] == 60.0
    assert entry["options"]["expires"] == entry["schedule"]


def test_events_named_by_the_latest_finding_are_marked_where_they_are_shown(ten: Caller) -> None:
    officer = admin_client(ten.tenant, "officer", group="compliance officer")
    with tenant_context(ten.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute("""UPDATE memory_event SET payload_json = '{"n":99}' WHERE seq = 7""")
        check = verify()
        assert [f["kind"] for f in check.findings] == [FindingKind.CONTENT_ALTERED]
        seventh = Event.objects.get(seq=7)
    message = check.findings[0]["message"]
    assert "payload" in message, message
    check_url = f"/admin/compliance/chaincheck/{check.pk}/change/"
    event_url = f"/admin/memory/event/{seventh.pk}/change/"

    timeline = officer.get("/admin/sessions/", {"session": "s-drill"}).content.decode()
    row = timeline[timeline.index('id="event-7"') - 40 : timeline.index('id="event-8"')]
    assert "is-flagged" in row and "integrity-warning" in row
    assert message in row and f'href="{check_url}"' in row
    other = timeline[timeline.index('id="event-6"') : timeline.index('id="event-7"')]
    assert "integrity-warning" not in other

    page = officer.get(event_url).content.decode()
    assert 'class="integrity-warning' in page and message in page and f'href="{check_url}"' in page
    listing = officer.get("/admin/memory/event/").content.decode()
    assert 'class="integrity-warning' in listing and f'href="{event_url}"' in listing

    findings = officer.get(check_url).content.decode()
    assert f'href="{event_url}"' in findings  # the finding links the event it names
    assert f'href="{event_url}"' in panel(officer)

    with tenant_context(ten.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute("""UPDATE memory_event SET payload_json = '{"n":6}' WHERE seq = 7""")
        assert verify().status == CheckStatus.INTACT
    assert "integrity-warning" not in officer.get(event_url).content.decode()  # the latest check rules


def test_anchors_are_counted_once_however_many_copies_were_read(ten: Caller, tmp_path, settings) -> None:  # type: ignore[no-untyped-def]
    settings.ENGRAM = {**settings.ENGRAM, "ANCHOR_SINK": str(tmp_path / "anchors.jsonl")}
    officer = admin_client(ten.tenant, "officer", group="compliance officer")
    with tenant_context(ten.tenant):
        services.anchor_head()
        append(ten.agent, 1)
        services.anchor_head()
        check = verify()  # reads the two anchors in the database and their two copies in the sink
    assert check.status == CheckStatus.INTACT and check.anchors_checked == 2
    assert "2 signed anchors checked" in panel(officer)


def test_a_scheduled_check_finds_the_last_events_deleted_when_no_event_came_after(
    ten: Caller, rotation: int
) -> None:
    with tenant_context(ten.tenant):
        assert services.chain_check_scheduled().status == CheckStatus.INTACT  # type: ignore[union-attr]
        head = Event.objects.order_by("-seq").first()
        assert head is not None
        with behind_the_triggers() as cursor:  # the head row still says the log ends at head.seq
            cursor.execute("DELETE FROM memory_event WHERE seq >= %s", [head.seq - 1])
        check = services.chain_check_scheduled()
    assert check is not None and check.scope == "incremental" and check.status == CheckStatus.BROKEN
    assert [f["kind"] for f in check.findings] == [FindingKind.TRUNCATED]
    assert f"the chain head says #{head.seq}, the log ends at #{head.seq - 2}" in check.findings[0]["message"]


def test_routine_scheduled_checks_leave_the_history_after_a_week(ten: Caller, rotation: int) -> None:
    from datetime import timedelta

    from django.utils import timezone

    long_ago = timezone.now() - timedelta(days=8)
    with tenant_context(ten.tenant):
        kept = [
            ChainCheck.objects.create(requested_by="user:x", scope="full", status=CheckStatus.INTACT),
            ChainCheck.objects.create(
                requested_by="job:scheduled-verify", scope="incremental", status=CheckStatus.BROKEN
            ),
            ChainCheck.objects.create(
                requested_by="job:scheduled-verify", scope="incremental", status=CheckStatus.INTACT
            ),
        ]
        old = ChainCheck.objects.create(
            requested_by="job:scheduled-verify", scope="incremental", status=CheckStatus.INTACT
        )
        ChainCheck.objects.filter(pk__in=[c.pk for c in kept[:2]] + [old.pk]).update(
            finished_at=long_ago, created_at=long_ago
        )
        ChainCheck.objects.filter(pk=kept[2].pk).update(finished_at=timezone.now() - timedelta(days=6))
        check = services.chain_check_scheduled()
        assert check is not None
        assert set(ChainCheck.objects.values_list("pk", flat=True)) == {c.pk for c in kept} | {check.pk}
