"""The trail's search (``compliance.selectors.trail_search``) through the admin: each field filters,
the fields combine, and another tenant's officer finds nothing of this tenant's trail."""

from __future__ import annotations

from django.utils import timezone
from django_tenants.utils import tenant_context

from memory.episodic.models import EventKind
from memory.episodic.services import EventData, events_append
from tests.factories import Caller, admin_client


def _hits(html: str) -> int:
    table = html.split('id="trail-results"', 1)[1].split("</table>", 1)[0]
    return table.count('class="trail-hit"')


def test_the_trail_search_filters_by_text_subject_agent_and_session_within_the_tenant(
    alice: Caller, mallory: Caller
) -> None:
    with tenant_context(alice.tenant):
        events_append(
            agent=alice.agent,
            events=[
                EventData(
                    session_id=session,
                    kind=EventKind.MESSAGE,
                    content=text,
                    occurred_at=timezone.now(),
                    data_subject=subject,
                )
                for session, text, subject in (
                    ("s-1", "The invoices were sent twice", "cust-1"),
                    ("s-1", "Refund approved", "cust-1"),
                    ("s-2", "Invoice address changed", "cust-2"),
                )
            ],
        )
    officer = admin_client(alice.tenant, "olga", group="compliance officer")
    assert _hits(officer.get("/admin/sessions/?text=invoice").content.decode()) == 2  # stemmed
    assert _hits(officer.get("/admin/sessions/?subject=cust-1").content.decode()) == 2
    assert _hits(officer.get("/admin/sessions/?text=invoice&subject=cust-2").content.decode()) == 1
    assert _hits(officer.get("/admin/sessions/?in_session=s-1&agent=alice").content.decode()) == 2
    assert _hits(officer.get("/admin/sessions/?agent=nobody").content.decode()) == 0
    outsider = admin_client(mallory.tenant, "ursula", group="compliance officer")
    assert _hits(outsider.get("/admin/sessions/?text=invoice").content.decode()) == 0
