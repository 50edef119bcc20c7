"""Compliance in the admin's templates: ``{% chain_status_panel %}``, the integrity panel of the admin
index, for who may see it; ``{% event_integrity event %}`` and ``{% events_integrity_banner %}``, the
warning on an event's page and above the event list when the latest chain check names events."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

from compliance import admin_home, admin_views, selectors

register = template.Library()

BANNER_EVENTS = 50  # events listed above the event list; the check's page lists them all


@register.inclusion_tag("admin/compliance/_status_panel.html", takes_context=True)
def chain_status_panel(context: dict[str, Any]) -> dict[str, Any]:
    request = context["request"]
    if not request.user.has_perm(admin_views.VIEW_STATUS):
        return {"hidden": True}
    return {**admin_views.status_context(request), "csrf_token": context.get("csrf_token")}


def _check_url(check: Any) -> str:
    return reverse("admin:compliance_chaincheck_change", args=[check.pk]) if check is not None else ""


@register.inclusion_tag("admin/compliance/_event_integrity.html")
def event_integrity(event: Any) -> dict[str, Any]:
    """What the latest chain check found about ``event`` (an ``Event``, or None on an add page)."""
    flags = selectors.flagged_events()
    findings = flags.of(event.seq) if event is not None else []
    return {"findings": findings, "check": flags.check, "check_url": _check_url(flags.check)}


@register.inclusion_tag("admin/compliance/_events_integrity_banner.html")
def events_integrity_banner() -> dict[str, Any]:
    """The events the latest chain check names, each linked to its page (the first
    ``BANNER_EVENTS``)."""
    flags = selectors.flagged_events()
    seqs = sorted(flags.by_seq)[:BANNER_EVENTS]
    urls = admin_views.event_urls(seqs)
    return {
        "check": flags.check,
        "check_url": _check_url(flags.check),
        "events": [{"seq": seq, "url": urls.get(seq, ""), "findings": flags.of(seq)} for seq in seqs],
        "more": max(0, len(flags.by_seq) - BANNER_EVENTS),
    }


@register.inclusion_tag("admin/compliance/_waiting.html", takes_context=True)
def waiting_for_you(context: dict[str, Any]) -> dict[str, Any]:
    """The home page's "Waiting for you" (``compliance.admin_home.waiting_for``): hidden for a person
    who may act on none of it."""
    sections = admin_home.waiting_for(context["request"].user)
    return {"sections": sections, "total": sum(s.count for s in sections)}
