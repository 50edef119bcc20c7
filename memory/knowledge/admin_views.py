"""The contradiction review queue in the tenant admin: a page of open contradictions and an htmx
endpoint that resolves one through ``services.contradiction_resolve``.

Both views are mounted by ``ContradictionAdmin.get_urls`` (``admin.site.admin_view`` does the login
and staff checks). Looking needs ``memory.view_contradiction``; acting needs
``memory.resolve_contradiction``. With htmx (``request.htmx``) the queue view renders only the list
and the resolve view answers with a fragment: nothing for the resolved row (so it leaves the queue)
plus out-of-band swaps for the open count, a line in the decision log and any rows the decision
closed or opened as a side effect. Domain errors (already resolved by someone else, unknown
resolution) come back as the row with a visible message and a 4xx status, never a 500.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Prefetch, QuerySet
from django.http import HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from core.admin import HtmxHttpRequest
from core.errors import DomainError, InvalidInput

from . import services
from .models import Contradiction, ContradictionStatus, Fact, FactProvenance, Resolution
from .selectors import contradiction_list

if TYPE_CHECKING:
    from .admin import ContradictionAdmin

QUEUE_PAGE_SIZE = 20  # cards a page renders: a reviewer works from the top; the list holds all
PROVENANCE_SHOWN = 3  # assertions listed per fact in the queue; the fact's page lists them all
MAX_NOTE_CHARS = 2000
RESOLVE_PERMISSION = "memory.resolve_contradiction"

# past-tense wording for the decision log shown above the queue
RESOLVED_WORDING = {
    Resolution.ACCEPT_NEW: "accepted the new fact",
    Resolution.KEEP_EXISTING: "kept the existing fact",
    Resolution.BOTH_VALID: "marked both valid (the predicate is now 'many')",
    Resolution.DISMISS: "dismissed",
}


@dataclass(frozen=True)
class ResolutionButton:
    """One of the four buttons of a queue row: ``value`` is the ``Resolution`` posted."""

    value: str
    label: str
    help: str
    primary: bool = False


BUTTONS = [
    ResolutionButton(Resolution.ACCEPT_NEW, "Accept new", Resolution.ACCEPT_NEW.label, primary=True),
    ResolutionButton(Resolution.KEEP_EXISTING, "Keep existing", Resolution.KEEP_EXISTING.label),
    ResolutionButton(Resolution.BOTH_VALID, "Both valid", Resolution.BOTH_VALID.label),
    ResolutionButton(Resolution.DISMISS, "Dismiss", Resolution.DISMISS.label),
]


def object_parts(fact: Fact) -> tuple[str, str]:
    """``(text, kind)`` of a fact's object for display: an entity's name and ``"entity"``, or a
    literal's value as written (``true``/``false`` for booleans) and its literal type."""
    if fact.object_entity_id is not None:
        return str(fact.object_entity), "entity"
    value = fact.literal_value
    if isinstance(value, bool):
        return ("true" if value else "false"), fact.literal_type
    return str(value), fact.literal_type


def _provenance_prefetch(lookup: str) -> Prefetch:
    return Prefetch(
        lookup,
        queryset=FactProvenance.objects.select_related("agent", "source_event")
        .defer("source_event__search")
        .order_by("asserted_at", "id"),
    )


def queue_queryset(*, ids: list[int] | None = None) -> QuerySet[Contradiction]:
    """Open contradictions (oldest first) with both facts and all their provenance loaded in a fixed
    number of queries; ``ids`` restricts it to those contradictions (whatever their status)."""
    qs = contradiction_list(status=None if ids is not None else ContradictionStatus.OPEN)
    if ids is not None:
        qs = qs.filter(pk__in=ids)
    return qs.prefetch_related(
        _provenance_prefetch("existing_fact__provenance"), _provenance_prefetch("new_fact__provenance")
    )


def _fact_view(fact: Fact) -> dict[str, Any]:
    text, kind = object_parts(fact)
    provenance = list(fact.provenance.all())  # prefetched
    return {
        "fact": fact,
        "object_text": text,
        "object_kind": kind,
        "provenance": provenance[-PROVENANCE_SHOWN:],  # the latest assertions
        "provenance_hidden": max(0, len(provenance) - PROVENANCE_SHOWN),
        "assertions": len(provenance),
    }


def queue_item(contradiction: Contradiction, *, error: str = "") -> dict[str, Any]:
    """Template context of one queue row: the contradiction, both facts with their provenance, and
    an optional ``error`` message shown in the row."""
    return {
        "contradiction": contradiction,
        "existing": _fact_view(contradiction.existing_fact),
        "new": _fact_view(contradiction.new_fact),
        "is_open": contradiction.status == ContradictionStatus.OPEN,
        "error": error,
    }


def _open_count() -> int:
    return Contradiction.objects.filter(status=ContradictionStatus.OPEN).count()


def _base_context(model_admin: ContradictionAdmin, request: HtmxHttpRequest) -> dict[str, Any]:
    return {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "can_resolve": request.user.has_perm(RESOLVE_PERMISSION),
        "buttons": BUTTONS,
        "open_count": _open_count(),
        "page_size": QUEUE_PAGE_SIZE,
    }


def queue_view(model_admin: ContradictionAdmin, request: HtmxHttpRequest) -> HttpResponse:
    """The review queue: the oldest ``QUEUE_PAGE_SIZE`` open contradictions, each with both facts
    side by side. With htmx, only the list (to refresh it in place)."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])  # a page to look at: posts go to resolve
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    context = {
        **_base_context(model_admin, request),
        "title": "Contradiction review queue",
        "items": [queue_item(c) for c in queue_queryset()[:QUEUE_PAGE_SIZE]],
    }
    # one view, two renderings: the page, or (htmx refresh) the list with the count out of band
    template = "admin/memory/contradiction/queue.html"
    if request.htmx:
        template = "admin/memory/contradiction/_queue_list.html"
    return TemplateResponse(request, template, context)


def _related_open_ids(contradiction_id: int) -> set[int]:
    """Open contradictions on the predicate of ``contradiction_id``: the only ones a resolution can
    close or open besides itself (``accept_new`` moves, ``both_valid`` dismisses on the predicate)."""
    predicate_id = (
        Contradiction.objects.filter(pk=contradiction_id)
        .values_list("new_fact__predicate_id", flat=True)
        .first()
    )
    if predicate_id is None:
        return set()
    return set(
        Contradiction.objects.filter(
            status=ContradictionStatus.OPEN, new_fact__predicate_id=predicate_id
        ).values_list("pk", flat=True)
    )


def resolve_view(
    model_admin: ContradictionAdmin, request: HtmxHttpRequest, contradiction_id: int
) -> HttpResponse:
    """Resolve one contradiction with the posted ``resolution`` and optional ``note``.

    htmx: 200 with the out-of-band updates (the row itself is replaced by nothing); 400/404/409 with
    the row and a message; 403 with a message for someone without ``resolve_contradiction`` who may
    view contradictions, a bare 403 for anyone else.
    Without htmx (a plain form post): a redirect back to the queue with a message.
    """
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    resolution = request.POST.get("resolution", "")
    note = request.POST.get("note", "").strip()
    if not request.user.has_perm(RESOLVE_PERMISSION):
        # the htmx answer shows the row as it is now: only to someone who may look at the queue
        if not request.htmx or not model_admin.has_view_permission(request):
            raise PermissionDenied
        return _row_error_response(
            model_admin,
            request,
            contradiction_id,
            "You can look at this queue but not resolve contradictions "
            "(the resolve_contradiction permission is missing).",
            status=403,
        )
    try:
        if len(note) > MAX_NOTE_CHARS:
            raise InvalidInput(f"The note is limited to {MAX_NOTE_CHARS} characters.", field="note")
        before = _related_open_ids(contradiction_id)
        contradiction = services.contradiction_resolve(
            contradiction_id=contradiction_id,
            resolution=resolution,
            reviewer=request.user.get_username(),
            note=note,
        )
    except DomainError as error:
        if not request.htmx:
            messages.error(request, f"Contradiction #{contradiction_id}: {error.message}")
            return HttpResponseRedirect(reverse("admin:memory_contradiction_queue"))
        return _row_error_response(model_admin, request, contradiction_id, error.message, status=error.status)

    fact = contradiction.existing_fact
    summary = (
        f"#{contradiction.pk} {fact.subject} · {fact.predicate}: {RESOLVED_WORDING[Resolution(resolution)]}"
    )
    if not request.htmx:
        messages.success(request, f"Resolved {summary}.")
        return HttpResponseRedirect(reverse("admin:memory_contradiction_queue"))
    after = _related_open_ids(contradiction_id)
    closed = sorted(before - after - {contradiction.pk})
    opened = [queue_item(c) for c in queue_queryset(ids=sorted(after - before))]
    context = {
        **_base_context(model_admin, request),
        "resolved": contradiction,
        "summary": summary,
        "closed_ids": closed,
        "opened_items": opened,
    }
    return TemplateResponse(request, "admin/memory/contradiction/_resolved.html", context)


def _row_error_response(
    model_admin: ContradictionAdmin,
    request: HtmxHttpRequest,
    contradiction_id: int,
    message: str,
    *,
    status: int,
) -> HttpResponse:
    """The row of ``contradiction_id`` (as it is now) with ``message``, plus the open count; a bare
    message when the contradiction does not exist in this tenant."""
    contradiction = queue_queryset(ids=[contradiction_id]).first()
    if contradiction is not None and contradiction.status != ContradictionStatus.OPEN:
        when = f"{contradiction.resolved_at:%Y-%m-%d %H:%M} UTC" if contradiction.resolved_at else "earlier"
        if contradiction.resolution:
            who = contradiction.reviewer or "Someone"
            message += f" {who} chose “{contradiction.get_resolution_display()}” at {when}."
        else:
            message += f" It was {contradiction.status} at {when}" + (
                f" ({contradiction.note})." if contradiction.note else "."
            )
        message += " Your decision was not applied."
    context = {
        **_base_context(model_admin, request),
        "item": queue_item(contradiction, error=message) if contradiction else None,
        "missing_id": contradiction_id,
        "error": message,
    }
    return TemplateResponse(request, "admin/memory/contradiction/_row_error.html", context, status=status)
