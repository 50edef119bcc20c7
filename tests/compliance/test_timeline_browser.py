"""The session timeline as an auditor reads it, in a real browser (Playwright drives Debian's
Chromium against uvicorn on the test database) at 1366x768: each row names its data subject; an
event whose content an erasure removed says so and links the decision that removed it; payloads
are JSON (on the timeline and on the event's page); the review queue's contradiction cards link
each assertion's session to its timeline, at the source event.

Screenshots are kept in ``var/test-artifacts/screens/`` (git-ignored).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone
from django_tenants.utils import tenant_context

from agents.services import agent_create
from compliance import services
from memory.episodic.models import Event, EventKind
from memory.episodic.services import EventData, events_append
from tenants.models import Tenant
from tests.compliance.browser import chromium, login, people_create, shot, site_host
from tests.compliance.conftest import finished
from tests.factories import asgi_server, conflict_make
from tests.memory.knowledge.test_review_queue_browser import chromium_path  # noqa: F401

KEPT, ERASED = "cust-kept-1", "cust-erased-2"


@dataclass
class Site:
    base: str
    decision_seq: int
    call_pk: int


@pytest.fixture
def timeline_site(scratch_tenant: Tenant) -> Iterator[Site]:
    host = site_host(scratch_tenant)
    with tenant_context(scratch_tenant):
        people_create(scratch_tenant, olga="compliance officer", pavel="compliance officer", oscar="operator")
        bot = agent_create(by=None, name="support-bot")
        conflict_make(bot, agent_create(by=None, name="critic"))  # sessions s-onboarding and s-review

        def event(kind: str, content: str, subject: str, payload: dict) -> EventData:
            return EventData(
                session_id="s-ticket",
                kind=kind,
                content=content,
                payload=payload,
                occurred_at=timezone.now(),
                data_subject=subject,
            )

        made = events_append(
            agent=bot,
            events=[
                event(EventKind.MESSAGE, "Customer asks where the parcel is", KEPT, {}),
                event(
                    EventKind.TOOL_CALL, "track_parcel", KEPT, {"args": {"parcel": "P-77", "express": True}}
                ),
                event(EventKind.TOOL_RESULT, "in transit", KEPT, {"status": "in transit", "eta": None}),
                event(EventKind.MESSAGE, "My card number is 4000 1234", ERASED, {}),
            ],
        )
        request = services.erasure_request(
            kind="subject", value=ERASED, legal_basis="GDPR Art. 17(1)(a)", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="pavel")
        services.erasure_run(request_id=request.pk)
        finished(request)
        redacted = Event.objects.get(pk=made[3].pk)
        assert redacted.redacted_by is not None
        decision_seq, call_pk = redacted.redacted_by, made[1].pk
    connection.set_schema_to_public()
    with asgi_server(ENGRAM_SERVE_STATIC="1") as port:
        yield Site(f"http://{host}:{port}", decision_seq, call_pk)


def test_the_timeline_names_subjects_redactions_and_json_in_chromium(
    chromium_path: Path,  # noqa: F811 (the fixture imported above)
    timeline_site: Site,
) -> None:
    from playwright.sync_api import expect

    base = timeline_site.base
    with chromium(chromium_path) as browser:
        page = login(browser, base, "olga")
        page.goto(f"{base}/admin/sessions/?session=s-ticket")
        rows = page.locator("#timeline .tl-row")
        expect(rows.filter(has_text="track_parcel").locator(".tl-subject")).to_have_text(KEPT)
        call = rows.filter(has_text="track_parcel").locator("pre")
        expect(call).to_contain_text('"express": true')  # JSON, not Python's True
        expect(rows.filter(has_text="in transit").locator("pre")).to_contain_text('"eta": null')
        # the result sits under its call, each linking the other
        result = rows.filter(has_text="in transit")
        expect(result).to_have_class(re.compile(r"\bis-tool-result\b"))
        expect(result.locator("a.tl-pair")).to_contain_text("answers call #")
        expect(rows.filter(has_text="track_parcel").locator("a.tl-pair")).to_contain_text("result: #")
        redacted = page.locator(".tl-redacted")
        expect(redacted).to_have_count(1)
        expect(redacted).to_contain_text(f"decision #{timeline_site.decision_seq}")
        assert "4000 1234" not in page.content()
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
        shot(page, "timeline-tool-calls.png")
        redacted.locator("a").click()
        expect(page.locator("#result_list tbody tr")).to_have_count(1)
        expect(page.locator("#result_list")).to_contain_text("Decision")

        page.goto(f"{base}/admin/memory/event/{timeline_site.call_pk}/change/")
        expect(page.locator("pre.event-payload")).to_contain_text('"parcel": "P-77"')
        assert "'parcel'" not in page.content()

        # the trail's search: words, then a data subject, each hit opening its row in the timeline
        page.goto(f"{base}/admin/sessions/")
        page.fill("#id_text", "parcel")
        page.click("#trail-search input[type=submit]")
        hits = page.locator("#trail-results tbody tr")
        expect(hits.filter(has_text="Customer asks where the parcel is")).to_have_count(1)
        assert hits.count() >= 1 and all(KEPT in text for text in hits.all_inner_texts())
        page.goto(f"{base}/admin/sessions/?subject={ERASED}")  # erased: the identifier went too
        expect(page.locator("#trail-results")).to_contain_text("No event matches.")
        page.goto(f"{base}/admin/sessions/?in_session=s-ticket")
        expect(page.locator("#trail-results tbody tr")).to_have_count(4)
        expect(page.locator("#trail-results")).to_contain_text(
            f"content removed (decision #{timeline_site.decision_seq})"
        )
        shot(page, "trail-search.png")
        page.locator("a.trail-hit").first.click()
        expect(page.locator("h1")).to_contain_text("Session s-ticket")
        assert "#event-" in page.url
        page.goto(f"{base}/admin/sessions/?agent=support-bot&in_session=s-ticket&text=transit")
        expect(page.locator("#trail-results tbody tr")).to_have_count(1)

        page = login(browser, base, "oscar")
        page.goto(f"{base}/admin/memory/contradiction/queue/")
        link = page.locator("a.cq-session", has_text="s-onboarding").first
        link.click()
        expect(page.locator("h1")).to_contain_text("Session s-onboarding")
        assert "#event-" in page.url
        shot(page, "contradiction-session-timeline.png")
