"""The console's busiest pages need a fixed number of queries whatever the number of rows behind
them: the home page of each role (however much waits), and a page of a session's timeline
(however long the session). The contradiction queue's count is held in
``tests/memory/knowledge/test_review_queue.py``. ``benchmarks/console_pages.py`` times the same
pages at 1,000 rows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_tenants.utils import tenant_context

from compliance import services
from memory.episodic.models import EventKind
from memory.episodic.services import EventData, events_append
from memory.knowledge.services import FactData, FactObject, fact_assert
from tests.factories import Caller, admin_client, conflict_make

SESSION = "s-queries"


def _queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    return len(captured)


def _grow(tenant: object, add: Callable[[int], None], start: int, stop: int) -> None:
    with tenant_context(tenant):
        for i in range(start, stop):
            add(i)


def test_the_home_page_needs_a_fixed_number_of_queries_per_role(alice: Caller, bob: Caller) -> None:
    """Each role's home page, with one of everything waiting and then with many: same count."""
    people = {
        "olga": admin_client(alice.tenant, "olga", group="compliance officer"),
        "pavel": admin_client(alice.tenant, "pavel", group="compliance officer"),
        "oscar": admin_client(alice.tenant, "oscar", group="operator"),
        "nobody": admin_client(alice.tenant, "nobody"),
    }
    soon = timezone.now().date() + timedelta(days=3)

    def waiting(i: int) -> None:
        services.erasure_request(
            kind="subject", value=f"cust-gone-{i}", legal_basis="GDPR Art. 17", note="", username="olga"
        )
        hold = services.hold_place(
            kind="subject", value=f"cust-held-{i}", reason="litigation", username="olga", review_by=soon
        )
        services.hold_release(hold=hold, username="olga", reason="case closed")
        conflict_make(alice.agent, bob.agent, subject=f"Person {i}")

    _grow(alice.tenant, waiting, 0, 1)
    few = {name: _queries(client, "/admin/") for name, client in people.items()}
    _grow(alice.tenant, waiting, 1, 12)
    many = {name: _queries(client, "/admin/") for name, client in people.items()}
    assert many == few
    # a person in no group reads the apps list and nothing that waits
    assert few["nobody"] < few["pavel"]


def test_a_timeline_page_needs_a_fixed_number_of_queries(alice: Caller, bob: Caller) -> None:
    """A session's first and next pages with a few events and with ten times as many (tool calls
    answered by results, decisions naming facts, facts asserted in the session): same count."""
    officer = admin_client(alice.tenant, "olga", group="compliance officer")
    start = timezone.now() - timedelta(hours=1)

    def turn(i: int) -> None:
        fact = fact_assert(
            agent=alice.agent,
            data=FactData(
                subject=f"Person {i}",
                predicate="works_at",
                object=FactObject(entity="Acme"),
                session_id=SESSION,
            ),
        ).fact
        events_append(
            agent=alice.agent,
            events=[
                EventData(
                    session_id=SESSION,
                    kind=kind,
                    content=f"{kind} {i}",
                    payload=payload,
                    occurred_at=start + timedelta(seconds=i * 4 + n),
                    data_subject=f"cust-{i % 3}",
                )
                for n, (kind, payload) in enumerate(
                    [
                        (EventKind.MESSAGE, {}),
                        (EventKind.TOOL_CALL, {"tool": "crm", "call_id": f"c{i}"}),
                        (EventKind.TOOL_RESULT, {"call_id": f"c{i}", "rows": i}),
                        (EventKind.DECISION, {"fact_id": fact.pk}),
                    ]
                )
            ],
        )

    def pages() -> tuple[int, int]:
        first = f"/admin/sessions/?session={SESSION}"
        with CaptureQueriesContext(connection):
            html = officer.get(first).content.decode()
        cursor = html.split('id="timeline-next" href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
        return _queries(officer, first), _queries(officer, f"/admin/sessions/{cursor}")

    _grow(alice.tenant, turn, 0, 20)  # 80 events: the second page of three is a middle one
    few = pages()
    _grow(alice.tenant, turn, 20, 150)  # 600 events
    assert pages() == few
