"""Legal holds carry a review date: ``HOLD_REVIEW_DAYS`` ahead unless the officer placing the hold
chooses one, moved on the hold's page by an officer (recorded in the trail with the date it had),
and the officers' home page lists the active holds whose review is within
``HOLD_REVIEW_NOTICE_DAYS`` or past."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from django_tenants.utils import tenant_context

from compliance import services
from compliance.models import HOLD_REVIEW_DAYS, LegalHold
from core.errors import Conflict, InvalidInput
from memory.episodic.models import Event
from tests.factories import Caller, admin_client


def _today() -> date:
    return timezone.now().date()


def _events(tenant: object, action: str) -> list[Event]:
    with tenant_context(tenant):
        return list(Event.objects.filter(payload_index__action=action).order_by("seq"))


def test_a_hold_is_reviewed_by_a_date_chosen_or_ninety_days_ahead(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        default = services.hold_place(kind="subject", value="cust-1", reason="litigation", username="olga")
        chosen = services.hold_place(
            kind="session",
            value="s-1",
            reason="audit",
            username="olga",
            review_by=_today() + timedelta(days=7),
        )
        with pytest.raises(InvalidInput, match="in the past") as refused:
            services.hold_place(
                kind="agent", value="bob", reason="x", username="olga", review_by=_today() - timedelta(days=1)
            )
        assert refused.value.field == "review_by"
    assert default.review_by == _today() + timedelta(days=HOLD_REVIEW_DAYS)
    assert chosen.review_by == _today() + timedelta(days=7)
    placed = _events(alice.tenant, "legal_hold_place")
    assert [e.payload["review_by"] for e in placed] == [
        default.review_by.isoformat(),
        chosen.review_by.isoformat(),
    ]


def test_moving_the_review_date_is_recorded_and_refused_for_a_released_hold(alice: Caller) -> None:
    later = _today() + timedelta(days=120)
    with tenant_context(alice.tenant):
        hold = services.hold_place(kind="subject", value="cust-2", reason="litigation", username="olga")
        before = hold.review_by
        moved = services.hold_review_set(hold=hold, review_by=later, username="pavel")
        assert services.hold_review_set(hold=hold.pk, review_by=later, username="pavel").review_by == later
        with pytest.raises(InvalidInput, match="in the past"):
            services.hold_review_set(hold=hold, review_by=_today() - timedelta(days=3), username="pavel")
        other = services.hold_place(
            kind="agent", value="bob", reason="audit", username="olga", four_eyes=False
        )
        services.hold_release(hold=other, username="olga", reason="done")
        with pytest.raises(Conflict, match="released"):
            services.hold_review_set(hold=other, review_by=later, username="olga")
    assert moved.review_by == later
    reviews = _events(alice.tenant, "legal_hold_review")  # the unchanged second call records nothing
    assert [(e.actor, e.payload["review_by"], e.payload["previous_review_by"]) for e in reviews] == [
        ("user:pavel", later.isoformat(), before.isoformat())
    ]


def test_the_holds_page_edits_the_review_date_of_an_active_hold_only(alice: Caller) -> None:
    olga = admin_client(alice.tenant, "olga", group="compliance officer")
    # the add form offers the date, and an empty one means the default
    assert 'name="review_by"' in olga.get("/admin/compliance/legalhold/add/").content.decode()
    added = olga.post(
        "/admin/compliance/legalhold/add/",
        {"kind": "subject", "value": "cust-3", "reason": "litigation", "review_by": ""},
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    with tenant_context(alice.tenant):
        hold = LegalHold.objects.get()
    assert hold.review_by == _today() + timedelta(days=HOLD_REVIEW_DAYS)
    page = f"/admin/compliance/legalhold/{hold.pk}/change/"
    html = olga.get(page).content.decode()
    assert 'name="review_by"' in html and 'name="reason"' not in html  # the one field that changes
    later = _today() + timedelta(days=30)
    saved = olga.post(page, {"review_by": later.isoformat()})
    assert saved.status_code == 302, saved.content.decode()[:2000]
    past = olga.post(page, {"review_by": (_today() - timedelta(days=1)).isoformat()})
    assert past.status_code == 200 and "in the past" in past.content.decode()
    assert olga.post(page, {"review_by": "soon"}).status_code == 200  # the form says what is wrong
    with tenant_context(alice.tenant):
        hold.refresh_from_db()
    assert hold.review_by == later
    assert [e.actor for e in _events(alice.tenant, "legal_hold_review")] == ["user:olga"]
    # who may only look sees the date and cannot move it
    viewer = admin_client(alice.tenant, "viewer")
    with tenant_context(alice.tenant):
        User.objects.get(username="viewer").user_permissions.add(
            Permission.objects.get(codename="view_legalhold")
        )
    assert 'name="review_by"' not in viewer.get(page).content.decode()
    assert viewer.post(page, {"review_by": (later + timedelta(days=1)).isoformat()}).status_code == 403
    # a released hold's page is read-only
    with tenant_context(alice.tenant):
        services.hold_release(hold=hold, username="olga", reason="over")  # placed without four eyes
    assert 'name="review_by"' not in olga.get(page).content.decode()
    assert olga.post(page, {"review_by": (later + timedelta(days=2)).isoformat()}).status_code == 403
    with tenant_context(alice.tenant):
        hold.refresh_from_db()
    assert hold.review_by == later


def test_the_officers_home_lists_the_holds_nearing_review(alice: Caller) -> None:
    today = _today()
    with tenant_context(alice.tenant):
        soon = services.hold_place(
            kind="subject",
            value="cust-soon",
            reason="r",
            username="olga",
            review_by=today + timedelta(days=3),
        )
        late = services.hold_place(kind="subject", value="cust-late", reason="r", username="olga")
        LegalHold.objects.filter(pk=late.pk).update(review_by=today - timedelta(days=2))  # time passed
        services.hold_place(kind="subject", value="cust-far", reason="r", username="olga")  # in 90 days
        gone = services.hold_place(
            kind="subject", value="cust-gone", reason="r", username="olga", four_eyes=False, review_by=today
        )
        services.hold_release(hold=gone, username="olga", reason="over")
    pavel = admin_client(alice.tenant, "pavel", group="compliance officer")
    html = pavel.get("/admin/").content.decode()
    section = html.split('id="waiting-reviews"', 1)[1].split("</div>\n  </div>", 1)[0]
    assert re.search(r'class="wf-total">2<', section), section
    assert "cust-late: review was due" in section and "2 days ago" in section
    assert "cust-soon: review by" in section and "in 3 days" in section
    assert "cust-far" not in section and "cust-gone" not in section
    assert f"/admin/compliance/legalhold/{late.pk}/change/" in section
    assert f"/admin/compliance/legalhold/{soon.pk}/change/" in section
    listing = re.search(r'<h3><a href="([^"]+)"', section)
    assert listing
    shown = pavel.get(listing.group(1).replace("&amp;", "&")).content.decode()
    assert (
        "cust-late" in shown and "cust-soon" in shown and "cust-far" not in shown and "cust-gone" not in shown
    )
    # the operator decides no holds
    oscar = admin_client(alice.tenant, "oscar", group="operator")
    assert 'id="waiting-reviews"' not in oscar.get("/admin/").content.decode()
