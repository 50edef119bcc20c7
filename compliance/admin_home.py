"""The admin home page's "Waiting for you": what waits for this person, by what they may act on.

Each section is shown only to a person holding the permission its action needs, and counts only
what that person may do now (an erasure or a hold release another officer asked for, not one's own):

| section | permission | what it counts |
|---|---|---|
| erasures | ``compliance.approve_erasurerequest`` | requested by someone else, waiting for a second officer |
| holds | ``compliance.change_legalhold`` | releases another officer asked for, waiting for a second one |
| reviews | ``compliance.change_legalhold`` | active holds whose review date is within ``HOLD_REVIEW_NOTICE_DAYS`` or past |
| checks | ``compliance.view_chaincheck`` | the last chain check broken or failed; scheduled checks overdue |
| contradictions | ``memory.resolve_contradiction`` | open contradictions in the review queue |
| proposals | ``memory.publish_skillversion`` | skill drafts agents proposed, not yet decided |

Each a few indexed queries (counts and the first ``SHOWN`` rows), whatever the queue's length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.models import AbstractUser, AnonymousUser
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from memory.knowledge.models import Contradiction, ContradictionStatus
from memory.procedural.models import SkillVersion, VersionStatus

from . import selectors
from .models import HOLD_REVIEW_NOTICE_DAYS, ErasureRequest, ErasureStatus, LegalHold

SHOWN = 5  # rows listed under a section's count; its link leads to all of them

APPROVE_ERASURE = "compliance.approve_erasurerequest"
RELEASE_HOLD = "compliance.change_legalhold"
VIEW_CHECKS = "compliance.view_chaincheck"
RESOLVE_CONTRADICTION = "memory.resolve_contradiction"
PUBLISH_SKILL = "memory.publish_skillversion"


@dataclass(frozen=True)
class Item:
    """One waiting thing: what it is in words and the page where it is decided."""

    label: str
    url: str


@dataclass(frozen=True)
class Section:
    """One kind of waiting thing: ``key`` (``erasures``, ``holds``, ``reviews``, ``checks``,
    ``contradictions``, ``proposals``), its ``title``, how many wait (``count``), the page listing them all (``url``),
    the first ``SHOWN`` of them (``items``) and what to do about them (``action``)."""

    key: str
    title: str
    count: int
    url: str
    action: str
    items: list[Item] = field(default_factory=list)


def _queue(
    *, key: str, title: str, waiting: QuerySet[Any], url: str, action: str, item: Callable[[Any], Item]
) -> Section:
    """A section over the rows of ``waiting`` (filtered and ordered): their count, the first
    ``SHOWN`` as ``item`` makes them."""
    return Section(
        key=key,
        title=title,
        count=waiting.count(),
        url=url,
        action=action,
        items=[item(row) for row in waiting[:SHOWN]],
    )


def _erasures(me: str) -> Section:
    return _queue(
        key="erasures",
        title="Erasures waiting for your approval",
        waiting=ErasureRequest.objects.filter(status=ErasureStatus.REQUESTED)
        .exclude(requested_by=me)
        .order_by("requested_at"),
        url=f"{reverse('admin:compliance_erasurerequest_changelist')}?{urlencode({'status__exact': 'requested'})}",
        action="approve as the second officer",
        item=lambda e: Item(
            f"{e.target_label}, asked by {e.requested_by.removeprefix('user:')} ({e.legal_basis})",
            reverse("admin:compliance_erasurerequest_detail", args=[e.pk]),
        ),
    )


def _holds(me: str) -> Section:
    return _queue(
        key="holds",
        title="Hold releases waiting for a second officer",
        waiting=LegalHold.objects.filter(released_at__isnull=True)
        .exclude(release_requested_by="")
        .exclude(release_requested_by=me)
        .order_by("release_requested_at"),
        url=reverse("admin:compliance_legalhold_changelist"),
        action="confirm or leave the hold in place",
        item=lambda h: Item(
            f"{h}, release asked by {h.release_requested_by.removeprefix('user:')}",
            reverse("admin:compliance_legalhold_release", args=[h.pk]),
        ),
    )


def _due(review_by: date, today: date) -> str:
    days = (review_by - today).days
    if days < 0:
        return f"review was due {review_by:%Y-%m-%d}, {-days} day{'s' if days != -1 else ''} ago"
    if days == 0:
        return "review due today"
    return f"review by {review_by:%Y-%m-%d}, in {days} day{'s' if days != 1 else ''}"


def _reviews() -> Section:
    today = timezone.now().date()
    due = today + timedelta(days=HOLD_REVIEW_NOTICE_DAYS)
    query = {"released_at__isempty": "1", "review_by__lte": due.isoformat()}
    return _queue(
        key="reviews",
        title="Holds nearing review",
        waiting=LegalHold.objects.filter(released_at__isnull=True, review_by__lte=due).order_by(
            "review_by", "pk"
        ),
        url=f"{reverse('admin:compliance_legalhold_changelist')}?{urlencode(query)}",
        action="decide whether each is still needed: set a new review date or release it",
        item=lambda h: Item(
            f"{h}: {_due(h.review_by, today)}", reverse("admin:compliance_legalhold_change", args=[h.pk])
        ),
    )


def _checks() -> Section:
    status = selectors.chain_status()
    items: list[Item] = []
    if status.broken and status.last_check is not None:
        check = status.last_check
        items.append(
            Item(
                f"Chain check #{check.pk} {check.status}: {len(check.findings or [])} finding(s)",
                reverse("admin:compliance_chaincheck_change", args=[check.pk]),
            )
        )
    if not status.scheduled_running:
        last = status.last_scheduled
        when = (
            f"the last one finished {last.finished_at:%Y-%m-%d %H:%M} UTC"
            if last and last.finished_at
            else "none ran yet"
        )
        items.append(
            Item(
                f"Scheduled chain checks overdue ({when})", reverse("admin:compliance_chaincheck_changelist")
            )
        )
    return Section(
        key="checks",
        title="Failed or overdue chain checks",
        count=len(items),
        url=reverse("admin:compliance_chaincheck_changelist"),
        action="read the findings, run a check",
        items=items,
    )


def _contradictions() -> Section:
    return _queue(
        key="contradictions",
        title="Open contradictions",
        waiting=Contradiction.objects.filter(status=ContradictionStatus.OPEN)
        .select_related(
            "existing_fact__subject",
            "existing_fact__predicate",
            "existing_fact__object_entity",
            "new_fact__object_entity",
        )
        .order_by("created_at", "pk"),
        url=f"{reverse('admin:memory_contradiction_changelist')}?{urlencode({'status__exact': 'open'})}",
        action="resolve or dismiss in the review queue",
        item=lambda c: Item(
            f"{c.existing_fact} or {c.new_fact.object_display}?",
            reverse("admin:memory_contradiction_change", args=[c.pk]),
        ),
    )


def _proposals() -> Section:
    return _queue(
        key="proposals",
        title="Skill proposals from agents",
        waiting=SkillVersion.objects.filter(status=VersionStatus.DRAFT, proposed_by__isnull=False)
        .select_related("skill", "proposed_by")
        .order_by("created_at", "pk"),
        url=reverse("admin:memory_skill_proposals"),
        action="review the diff, publish or reject",
        item=lambda v: Item(
            f"{v.skill.name} v{v.number}, proposed by {v.proposed_by}",
            reverse("admin:memory_skill_version", args=[v.skill_id, v.number]),
        ),
    )


def waiting_for(user: AbstractUser | AnonymousUser) -> list[Section]:
    """The sections of "Waiting for you" that ``user`` may act on, in the table's order (empty for
    someone who may act on none). Call inside the tenant."""
    me = f"user:{user.get_username()}"
    sections: list[Section] = []
    if user.has_perm(APPROVE_ERASURE):
        sections.append(_erasures(me))
    if user.has_perm(RELEASE_HOLD):
        sections.append(_holds(me))
        sections.append(_reviews())
    if user.has_perm(VIEW_CHECKS):
        sections.append(_checks())
    if user.has_perm(RESOLVE_CONTRADICTION):
        sections.append(_contradictions())
    if user.has_perm(PUBLISH_SKILL):
        sections.append(_proposals())
    return sections
