"""The session timeline: events and the objects they touched in time order, decisions highlighted,
keyset pages, filters, the same agent's previous and next sessions, links from the lists; and the
other tenant sees none of it."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone
from django_tenants.utils import tenant_context

from compliance import selectors
from memory.episodic.models import EventKind
from memory.episodic.services import EventData, decision_record, events_append
from memory.knowledge import services as knowledge
from memory.knowledge.services import FactData, FactObject
from tests.factories import Caller, admin_client
from tests.memory.checkpoints.test_checkpoints import body as checkpoint_body

T0 = timezone.now().replace(microsecond=0) - timedelta(days=1)


def session(caller: Caller, session_id: str, count: int, start: timedelta) -> None:
    events_append(
        agent=caller.agent,
        events=[
            EventData(
                session_id=session_id,
                kind=EventKind.TOOL_CALL if i % 3 == 0 else EventKind.MESSAGE,
                content=f"{session_id} step {i}",
                payload={"step": i, "tool": "search"} if i % 3 == 0 else {},
                occurred_at=T0 + start + timedelta(seconds=i),
            )
            for i in range(count)
        ],
    )


def test_a_session_page_shows_events_objects_and_decisions(alice: Caller, bob: Caller) -> None:
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    assert alice.post("/api/v1/sessions/s-main/checkpoints", checkpoint_body(1)).status_code == 201
    with tenant_context(alice.tenant):
        session(alice, "s-main", 5, timedelta(0))
        fact = knowledge.fact_assert(
            agent=bob.agent,
            data=FactData(
                subject="Ana", predicate="lives_in", object=FactObject(entity="Porto"), session_id="s-main"
            ),
        ).fact
        knowledge.fact_retract(agent=bob.agent, fact_id=fact.pk, reason="wrong city", may_curate=True)
    page = officer.get("/admin/sessions/", {"session": "s-main"})
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count('class="tl-row"') + html.count('class="tl-row is-decision"') >= 6
    assert 'class="tl-row is-decision"' in html and "Retracted fact" in html
    assert f'href="/admin/memory/fact/{fact.pk}/change/"' in html  # the decision links its object
    assert "asserted fact" in html and "checkpoint step 1" in html
    assert "&quot;tool&quot;: &quot;search&quot;" in html  # payloads pretty-printed
    assert "Export this session" in html


def test_pages_are_keyset_pages_in_time_order(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        session(alice, "s-long", 25, timedelta(0))
        seen: list[str] = []
        page = selectors.session_timeline(session_id="s-long", page_size=10)
        seen += [i.event.content for i in page.items if i.event]
        while page.next_cursor is not None:
            page = selectors.session_timeline(session_id="s-long", after=page.next_cursor, page_size=10)
            seen += [i.event.content for i in page.items if i.event]
        assert seen == [f"s-long step {i}" for i in range(25)]
        back = selectors.session_timeline(session_id="s-long", before=page.prev_cursor, page_size=10)
        assert [i.event.content for i in back.items if i.event] == [f"s-long step {i}" for i in range(10, 20)]


def test_filters_by_kind_agent_and_time(alice: Caller, bob: Caller) -> None:
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    with tenant_context(alice.tenant):
        session(alice, "s-mixed", 6, timedelta(0))
        session(bob, "s-mixed", 3, timedelta(minutes=5))
        decision_record(
            agent=bob.agent, session_id="s-mixed", content="Decided to stop.", payload={"action": "stop"}
        )
    calls = officer.get("/admin/sessions/", {"session": "s-mixed", "kind": "tool_call"}).content.decode()
    assert re.findall(r"s-mixed step \d", calls) == ["s-mixed step 0", "s-mixed step 3", "s-mixed step 0"]
    bobs = officer.get("/admin/sessions/", {"session": "s-mixed", "agent": "bob"}).content.decode()
    assert "Decided to stop." in bobs and re.findall(r"s-mixed step \d", bobs) == [
        f"s-mixed step {i}" for i in range(3)
    ]
    later = (T0 + timedelta(minutes=4)).strftime("%Y-%m-%dT%H:%M")
    since = officer.get("/admin/sessions/", {"session": "s-mixed", "since": later}).content.decode()
    assert re.findall(r"s-mixed step \d", since) == [f"s-mixed step {i}" for i in range(3)]


def test_previous_and_next_session_of_the_same_agent(alice: Caller, bob: Caller) -> None:
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    with tenant_context(alice.tenant):
        session(alice, "s-1", 2, timedelta(0))
        session(bob, "s-bob", 2, timedelta(minutes=1))
        session(alice, "s-2", 2, timedelta(minutes=2))
        session(alice, "s-3", 2, timedelta(minutes=3))
    html = officer.get("/admin/sessions/", {"session": "s-2"}).content.decode()
    assert re.search(r'id="previous-session" href="\?session=s-1"', html)
    assert re.search(r'id="next-session" href="\?session=s-3"', html)
    first = officer.get("/admin/sessions/", {"session": "s-1"}).content.decode()
    assert "(first)" in first and 'href="?session=s-2"' in first


def test_every_list_links_sessions_to_their_timeline(alice: Caller) -> None:
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    with tenant_context(alice.tenant):
        session(alice, "s-link", 1, timedelta(0))
        knowledge.fact_assert(
            agent=alice.agent,
            data=FactData(
                subject="Bo",
                predicate="likes",
                object=FactObject(literal_type="string", value="tea"),
                session_id="s-link",
            ),
        )
    assert alice.post("/api/v1/sessions/s-link/checkpoints", checkpoint_body(1)).status_code == 201
    link = 'href="/admin/sessions/?session=s-link"'
    for url in ("/admin/memory/event/", "/admin/memory/fact/", "/admin/memory/checkpoint/"):
        assert link in officer.get(url).content.decode(), url


def test_the_other_tenant_sees_nothing_of_a_session(alice: Caller, mallory: Caller) -> None:
    with tenant_context(alice.tenant):
        session(alice, "s-secret", 3, timedelta(0))
    beta = admin_client(mallory.tenant, "officer", group="compliance officer")
    html = beta.get("/admin/sessions/", {"session": "s-secret"}).content.decode()
    assert "s-secret step" not in html and "No events in this session." in html
    assert "s-secret" not in beta.get("/admin/sessions/").content.decode()


def test_the_timeline_needs_the_view_event_permission(alice: Caller) -> None:
    nobody = admin_client(alice.tenant, "nobody")
    response = nobody.get("/admin/sessions/", {"session": "s1"})
    assert response.status_code == 403
    html = response.content.decode()
    assert "Permission denied" in html and 'id="site-name"' in html and "memory.view_event" in html
    assert nobody.post("/admin/sessions/").status_code in (403, 405)
