"""The compliance console's admin pages: the integrity panel and "verify now" (htmx, polling the
check's progress), the public key, exports (a form, a progress bar polling the task, the download)
and the session timeline. Mounted by ``compliance.admin`` (``admin.site.admin_view`` does the login
and staff checks); each view checks the permission its effect needs and raises ``PermissionDenied``
otherwise, which ``compliance.views.permission_denied`` renders in the admin's style."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_safe
from django_htmx.http import HttpResponseClientRedirect

from core.admin import HtmxHttpRequest
from core.errors import DomainError
from memory.episodic.models import EventKind

from . import lifecycle, selectors, services, signing
from .models import (
    ErasureRequest,
    ErasureStatus,
    Export,
    ExportStatus,
    LegalHold,
    RetentionRule,
    ScopeKind,
    TargetKind,
)

VIEW_STATUS = "compliance.view_chaincheck"
RUN_CHECK = "compliance.run_chaincheck"
VIEW_EXPORTS = "compliance.view_export"
EXPORT = "compliance.export_trail"
VIEW_ANCHORS = "compliance.view_anchor"
VIEW_EVENTS = "memory.view_event"
POLL_SECONDS = 1


def _require(request: HtmxHttpRequest, perm: str) -> None:
    if not request.user.has_perm(perm):
        raise PermissionDenied(f"This page needs the {perm} permission.")


def _context(request: HtmxHttpRequest, **extra: Any) -> dict[str, Any]:
    return {**admin.site.each_context(request), **extra}


def event_urls(seqs: list[int]) -> dict[int, str]:
    """The admin pages of the events at ``seqs`` (those that exist), by seq."""
    base = reverse("admin:memory_event_changelist")
    return {seq: f"{base}{pk}/change/" for seq, pk in selectors.event_ids_by_seq(seqs).items()}


def findings_linked(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``findings`` each with ``url``: the admin page of the event it names ("" when none)."""
    seqs = [f.get("seq") for f in findings]
    urls = event_urls([seq for seq in seqs if isinstance(seq, int)])
    return [
        {**f, "url": urls.get(seq, "") if isinstance(seq, int) else ""}
        for f, seq in zip(findings, seqs, strict=True)
    ]


def status_context(request: HtmxHttpRequest) -> dict[str, Any]:
    """What the integrity panel shows (see ``selectors.chain_status``), the last check's first
    findings with the events they name linked, and what the user may do."""
    status = selectors.chain_status()
    findings = status.last_check.findings[:5] if status.last_check is not None else []
    return {
        "status": status,
        "findings": findings_linked(findings),
        "can_run": request.user.has_perm(RUN_CHECK),
        "can_export": request.user.has_perm(EXPORT),
        "can_see_anchors": request.user.has_perm(VIEW_ANCHORS),
        "poll_seconds": POLL_SECONDS,
    }


def chain_check_run_view(request: HtmxHttpRequest) -> HttpResponse:
    """POST: queue a verification as this person; answers the panel (htmx) or goes back to the index."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    _require(request, RUN_CHECK)
    services.chain_check_request(requested_by=f"user:{request.user.get_username()}")
    if request.htmx:
        return TemplateResponse(request, "admin/compliance/_status_panel.html", status_context(request))
    return HttpResponseRedirect(reverse("admin:index"))


@require_safe
def chain_check_progress_view(request: HtmxHttpRequest, check_id: int) -> HttpResponse:
    """GET: the panel as it is now (htmx polls it while a check runs)."""
    _require(request, VIEW_STATUS)
    if selectors.chain_check_get(check_id=check_id) is None:
        raise Http404("No such check.")
    return TemplateResponse(request, "admin/compliance/_status_panel.html", status_context(request))


@require_safe
def public_key_view(request: HtmxHttpRequest) -> HttpResponse:
    """GET: the signing key's public half as a PEM file, to check anchors and exports without Engram."""
    _require(request, VIEW_ANCHORS)
    try:
        pem = signing.public_key_pem()
    except DomainError as error:
        return HttpResponse(error.message, status=503, content_type="text/plain; charset=utf-8")
    response = HttpResponse(pem, content_type="application/x-pem-file")
    response["Content-Disposition"] = 'attachment; filename="engram-signing-key.pub.pem"'
    return response


class ExportForm(forms.Form):
    """The scope of an export; times are UTC (the admin's timezone)."""

    scope = forms.ChoiceField(choices=ScopeKind.choices, initial=ScopeKind.SESSION, widget=forms.RadioSelect)
    session_id = forms.CharField(required=False, max_length=200, label="Session")
    agent_name = forms.ChoiceField(required=False, label="Agent")
    occurred_from = forms.DateTimeField(required=False, label="From (UTC)", help_text="YYYY-MM-DD HH:MM")
    occurred_to = forms.DateTimeField(
        required=False, label="Until (UTC, exclusive)", help_text="YYYY-MM-DD HH:MM"
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["agent_name"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "—"), *((name, name) for name in selectors.agent_names())]


def export_new_view(request: HtmxHttpRequest) -> HttpResponse:
    """GET: the export form (``?session=`` fills in a session); POST: queue the export as this
    person and go to its progress page. Invalid input is shown on the form with a 400."""
    _require(request, EXPORT)
    if request.method == "POST":
        form = ExportForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                export = services.export_request(
                    username=request.user.get_username(),
                    scope=data["scope"],
                    session_id=data.get("session_id") or "",
                    agent_name=data.get("agent_name") or "",
                    occurred_from=data.get("occurred_from"),
                    occurred_to=data.get("occurred_to"),
                )
            except DomainError as error:
                form.add_error(error.field if error.field in form.fields else None, error.message)
            else:
                url = reverse("admin:compliance_export_progress", args=[export.pk])
                return HttpResponseClientRedirect(url) if request.htmx else HttpResponseRedirect(url)
        status = 400
    elif request.method in ("GET", "HEAD"):
        session = request.GET.get("session", "")
        form = ExportForm(
            initial={"scope": ScopeKind.SESSION if session else ScopeKind.ALL, "session_id": session}
        )
        status = 200
    else:
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    context = _context(request, title="Export the trail", form=form, opts=_export_opts())
    return TemplateResponse(request, "admin/compliance/export_new.html", context, status=status)


def _export_opts() -> Any:
    return Export._meta


def _export_page(
    request: HtmxHttpRequest, export: Export, *, status: int = 200, **extra: Any
) -> HttpResponse:
    context = _context(
        request,
        title=f"Export {str(export.pk)[:8]}",
        export=export,
        can_download=request.user.has_perm(EXPORT) and export.archive_available,
        poll_seconds=POLL_SECONDS,
        opts=_export_opts(),
        **extra,
    )
    template = (
        "admin/compliance/_export_progress.html" if request.htmx else "admin/compliance/export_progress.html"
    )
    return TemplateResponse(request, template, context, status=status)


@require_safe
def export_progress_view(request: HtmxHttpRequest, export_id: Any) -> HttpResponse:
    """GET: the export's page with its state and progress bar (htmx polls the bar alone until it is
    done); the download button only while the archive can be downloaded."""
    _require(request, VIEW_EXPORTS)
    export = selectors.export_get(export_id=export_id)
    if export is None:
        raise Http404("No such export.")
    return _export_page(request, export)


@require_safe
def export_download_view(request: HtmxHttpRequest, export_id: Any) -> HttpResponseBase:
    """GET: the archive of a finished export (the download is recorded in the trail). An export
    without an archive to give answers its own page saying why: 410 when the archive is gone
    (withdrawn by an erasure, or no longer on the server), 409 while it is not done or failed."""
    _require(request, EXPORT)
    export = selectors.export_get(export_id=export_id)
    if export is None:
        raise Http404("No such export.")
    if not export.archive_available:
        gone = export.status in (ExportStatus.DONE, ExportStatus.WITHDRAWN)
        return _export_page(
            request,
            export,
            status=410 if gone else 409,
            download_error=f"There is no archive to download: the export is {export.state}.",
        )
    try:
        handle = open(export.path, "rb")
    except OSError:  # removed since the check above
        return _export_page(
            request, export, status=410, download_error="The archive is no longer on the server."
        )
    services.export_download_record(export=export, username=request.user.get_username())
    response = FileResponse(
        handle, as_attachment=True, filename=export.filename, content_type="application/x-tar"
    )
    response["X-Archive-SHA256"] = export.sha256
    return response


def _when(value: str) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # the admin shows and takes UTC
    return moment


@require_safe
def timeline_view(request: HtmxHttpRequest) -> HttpResponse:
    """GET ``?session=ID``: the session's timeline (filters ``agent``, ``kind`` (repeatable),
    ``since``, ``until``; pages ``after`` / ``before``). Without a session: a search of the
    tenant's trail (``text``, ``subject``, ``agent``, ``in_session``: ``selectors.trail_search``)
    when one is asked, else the latest sessions."""
    _require(request, VIEW_EVENTS)
    session_id = request.GET.get("session", "")
    if not session_id:
        query = selectors.TrailQuery(
            **{name: request.GET.get(name, "").strip()[:200] for name in ("text", "subject", "agent")},
            session=request.GET.get("in_session", "").strip()[:200],
        )
        context = _context(
            request,
            title="Sessions",
            sessions=[] if not query.empty else selectors.recent_sessions(),
            query=query,
            found=selectors.trail_search(query=query),
            search_limit=selectors.TRAIL_SEARCH_LIMIT,
        )
        return TemplateResponse(request, "admin/compliance/sessions.html", context)
    kinds = [k for k in request.GET.getlist("kind") if k in EventKind.values]
    agent = request.GET.get("agent") or None
    since, until = _when(request.GET.get("since", "")), _when(request.GET.get("until", ""))
    after = selectors.Cursor.parse(request.GET.get("after", ""))
    before = selectors.Cursor.parse(request.GET.get("before", ""))
    page = selectors.session_timeline(
        session_id=session_id,
        agent_name=agent,
        kinds=kinds,
        since=since,
        until=until,
        after=after,
        before=before,
    )
    filters = {"session": session_id}
    if agent:
        filters["agent"] = agent
    if request.GET.get("since"):
        filters["since"] = request.GET["since"]
    if request.GET.get("until"):
        filters["until"] = request.GET["until"]
    base = urlencode(filters) + "".join(f"&kind={k}" for k in kinds)
    context = _context(
        request,
        title=f"Session {session_id}",
        page=page,
        kinds=EventKind.choices,
        chosen_kinds=kinds,
        chosen_agent=agent or "",
        since=request.GET.get("since", ""),
        until=request.GET.get("until", ""),
        next_url=f"?{base}&{urlencode({'after': page.next_cursor.token()})}" if page.next_cursor else "",
        prev_url=f"?{base}&{urlencode({'before': page.prev_cursor.token()})}" if page.prev_cursor else "",
        can_export=request.user.has_perm(EXPORT),
        # the objects' admin pages are <changelist><pk>/change/: reversed once, not per row
        urls={
            name: reverse(f"admin:{label}_changelist")
            for name, label in (
                ("event", "memory_event"),
                ("memory", "memory_semanticmemory"),
                ("fact", "memory_fact"),
                ("contradiction", "memory_contradiction"),
                ("checkpoint", "memory_checkpoint"),
                ("skillrun", "memory_skillrun"),
                ("export", "compliance_export"),
                ("chaincheck", "compliance_chaincheck"),
            )
        },
        is_nav_sidebar_enabled=False,  # the timeline needs the width; the breadcrumbs lead back
    )
    return TemplateResponse(request, "admin/compliance/timeline.html", context)


# --- the data lifecycle: erasure requests, the retention dry run -------------------------------------------

REQUEST_ERASURE = "compliance.add_erasurerequest"
APPROVE_ERASURE = "compliance.approve_erasurerequest"
VIEW_ERASURES = "compliance.view_erasurerequest"
VIEW_RETENTION = "compliance.view_retentionrule"


class ErasureForm(forms.Form):
    """What to erase and why."""

    kind = forms.ChoiceField(
        choices=[c for c in TargetKind.choices if c[0] != TargetKind.TENANT],
        initial=TargetKind.SUBJECT,
        widget=forms.RadioSelect,
        label="Erase",
    )
    value = forms.CharField(
        max_length=300,
        label="Which one",
        help_text="the data subject's id, the session id, the agent's name, the tag or the entity's name",
    )
    legal_basis = forms.CharField(max_length=300, label="Legal basis", help_text="e.g. GDPR Art. 17(1)(a)")
    note = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="kept with the request and in the trail: do not repeat the person's data here",
    )


def _erasure_opts() -> Any:
    return ErasureRequest._meta


def erasure_new_view(request: HtmxHttpRequest) -> HttpResponse:
    """GET: the request form; POST: request the erasure as this person (refused, on the form, when
    it meets a legal hold) and go to its page."""
    _require(request, REQUEST_ERASURE)
    if request.method == "POST":
        form = ErasureForm(request.POST)
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                erasure = services.erasure_request(
                    kind=data["kind"],
                    value=data["value"],
                    legal_basis=data["legal_basis"],
                    note=data.get("note") or "",
                    username=request.user.get_username(),
                )
            except DomainError as error:
                form.add_error(error.field if error.field in form.fields else None, error.message)
                status = error.status  # 409 when a legal hold refuses it
            else:
                url = reverse("admin:compliance_erasurerequest_detail", args=[erasure.pk])
                return HttpResponseClientRedirect(url) if request.htmx else HttpResponseRedirect(url)
    elif request.method in ("GET", "HEAD"):
        form = ErasureForm()
        status = 200
    else:
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    context = _context(request, title="Request an erasure", form=form, opts=_erasure_opts())
    return TemplateResponse(request, "admin/compliance/erasure_new.html", context, status=status)


def _erasure_context(request: HtmxHttpRequest, erasure: ErasureRequest, **extra: Any) -> dict[str, Any]:
    username = f"user:{request.user.get_username()}"
    return _context(
        request,
        title=f"Erasure {str(erasure.pk)[:8]}",
        erasure=erasure,
        can_approve=request.user.has_perm(APPROVE_ERASURE)
        and erasure.status in (ErasureStatus.REQUESTED, ErasureStatus.FAILED)
        and erasure.requested_by != username,
        own_request=erasure.requested_by == username,
        poll_seconds=POLL_SECONDS,
        opts=_erasure_opts(),
        **extra,
    )


@require_safe
def erasure_detail_view(request: HtmxHttpRequest, erasure_id: Any) -> HttpResponse:
    """GET: an erasure request with its state (htmx polls the state while it runs), the approve
    button for a second person, and the receipt once done."""
    _require(request, VIEW_ERASURES)
    erasure = selectors.erasure_get(erasure_id=erasure_id)
    if erasure is None:
        raise Http404("No such erasure request.")
    template = (
        "admin/compliance/_erasure_state.html" if request.htmx else "admin/compliance/erasure_detail.html"
    )
    return TemplateResponse(request, template, _erasure_context(request, erasure))


def erasure_approve_view(request: HtmxHttpRequest, erasure_id: Any) -> HttpResponse:
    """POST: approve the erasure as this person (not its requester) and queue it."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    _require(request, APPROVE_ERASURE)
    try:
        erasure = services.erasure_approve(request_id=erasure_id, username=request.user.get_username())
    except DomainError as error:
        erasure_or_none = selectors.erasure_get(erasure_id=erasure_id)
        if erasure_or_none is None:
            raise Http404("No such erasure request.") from None
        context = _erasure_context(request, erasure_or_none, approve_error=error.message)
        template = (
            "admin/compliance/_erasure_state.html" if request.htmx else "admin/compliance/erasure_detail.html"
        )
        return TemplateResponse(request, template, context, status=error.status)
    url = reverse("admin:compliance_erasurerequest_detail", args=[erasure.pk])
    return HttpResponseClientRedirect(url) if request.htmx else HttpResponseRedirect(url)


@require_safe
def erasure_receipt_view(request: HtmxHttpRequest, erasure_id: Any) -> HttpResponse:
    """GET: the signed receipt of a finished erasure, as JSON: ``{"receipt": <the RFC 8785 text
    signed>, "signature": <Ed25519, hex>, "key_id"}`` (the download is recorded)."""
    _require(request, VIEW_ERASURES)
    erasure = selectors.erasure_get(erasure_id=erasure_id)
    if erasure is None or erasure.status != ErasureStatus.DONE:
        raise Http404("No finished erasure with that id.")
    services.erasure_receipt_download_record(request=erasure, username=request.user.get_username())
    body = json.dumps(
        {
            "receipt": erasure.receipt,
            "signature": erasure.receipt_signature,
            "key_id": erasure.receipt_key_id,
        },
        indent=2,
    )
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{erasure.receipt_filename}"'
    return response


@require_safe
def retention_preview_view(request: HtmxHttpRequest) -> HttpResponse:
    """GET: the rules in effect per layer and what the next run would remove (a dry run: counts)."""
    _require(request, VIEW_RETENTION)
    now = timezone.now()
    rules = lifecycle.rules_in_effect()
    counts = lifecycle.retention_preview(now=now)
    rows = [
        {
            "layer": lifecycle_layer.label,
            "name": lifecycle_layer.name,
            "counts_from": lifecycle_layer.counts_from,
            "rules": [r for r in rules if r.layer == lifecycle_layer.name],
            "count": counts[lifecycle_layer.name],
        }
        for lifecycle_layer in lifecycle.LAYERS
    ]
    context = _context(
        request,
        title="Retention: what the next run would remove",
        rows=rows,
        now=now,
        holds=lifecycle.active_holds(),
        opts=RetentionRule._meta,
    )
    return TemplateResponse(request, "admin/compliance/retention_preview.html", context)


# --- legal holds: the release (a reason; a second officer where the hold was placed with four eyes) ----------

VIEW_HOLDS = "compliance.view_legalhold"
RELEASE_HOLD = "compliance.change_legalhold"


class HoldReleaseForm(forms.Form):
    """Why the hold may go (kept with the hold and in the trail)."""

    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=2000,
        help_text="e.g. the case is closed, the regulator's inquiry ended",
    )


def hold_release_view(request: HtmxHttpRequest, hold_id: int) -> HttpResponse:
    """GET: the hold, its state and what this person may do: ask for its release with a reason, or
    (a second officer, where the hold was placed with four eyes) confirm the release another asked
    for. POST ``step=request`` with ``reason``, or ``step=confirm``: through ``services.hold_release``
    and ``hold_release_confirm``, which record it; a refusal is shown on the page with its status."""
    _require(request, VIEW_HOLDS)
    hold = selectors.hold_get(hold_id=hold_id)
    if hold is None:
        raise Http404("No such legal hold.")
    form = HoldReleaseForm()
    status, error = 200, ""
    if request.method == "POST":
        _require(request, RELEASE_HOLD)
        username = request.user.get_username()
        confirm = request.POST.get("step") == "confirm"
        form = HoldReleaseForm(None if confirm else request.POST)
        if confirm or form.is_valid():
            try:
                if confirm:
                    services.hold_release_confirm(hold=hold, username=username)
                else:
                    services.hold_release(hold=hold, username=username, reason=form.cleaned_data["reason"])
            except DomainError as refusal:
                status, error = refusal.status, refusal.message
            else:
                return HttpResponseRedirect(reverse("admin:compliance_legalhold_release", args=[hold.pk]))
        else:
            status = 400
        hold = selectors.hold_get(hold_id=hold_id) or hold
    elif request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    me = f"user:{request.user.get_username()}"
    may_release = request.user.has_perm(RELEASE_HOLD) and hold.active
    context = _context(
        request,
        title=f"Release {hold}",
        hold=hold,
        form=form,
        error=error,
        can_ask=may_release and not hold.release_waiting,
        can_confirm=may_release and hold.release_waiting and hold.release_requested_by != me,
        own_request=hold.release_waiting and hold.release_requested_by == me,
        opts=LegalHold._meta,
    )
    return TemplateResponse(request, "admin/compliance/legalhold_release.html", context, status=status)
