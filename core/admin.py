"""Building blocks shared by the memory admins: read-only models, cheap counts, safe display."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from functools import cached_property, update_wrapper
from typing import Any, TypeVar, cast
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import Model
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.views.decorators.cache import never_cache
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from core.errors import DomainError


class HtmxHttpRequest(HttpRequest):
    """An admin request as django-htmx's middleware leaves it: ``request.htmx`` says whether htmx sent
    it (a type for annotations, as django-htmx's documentation suggests)."""

    htmx: HtmxDetails


_View = TypeVar("_View", bound=Callable[..., HttpResponseBase])

# Modules whose admin classes are bases for the project's own, never registered as they are
ADMIN_BASES_ONLY = frozenset({"django.contrib.auth.admin"})


class AdminSite(admin.AdminSite):
    """The tenant admin (``admin.site``, through ``config.apps.AdminConfig``).

    ``django.contrib.auth.admin`` registers ``User`` and ``Group`` when it is imported, with admins
    that save without recording the person; the project's own admins of both (``compliance.admin``)
    subclass them and save through services that do. So this site declines the registrations made
    with a class of ``ADMIN_BASES_ONLY`` (the project registers the models itself): each model has
    the one admin its app registers, and no app replaces another's.

    No navigation sidebar (``enable_nav_sidebar``): at 1366 px it took 300 px from every list, and a
    list with filters then ran off the right edge; the breadcrumbs and the home page lead to every
    app (docs/decisions/0065-admin-lists-fit-1366-px.md)."""

    enable_nav_sidebar = False

    def register(self, model_or_iterable: Any, admin_class: Any = None, **options: Any) -> None:
        if admin_class is not None and admin_class.__module__ in ADMIN_BASES_ONLY:
            return
        super().register(model_or_iterable, admin_class, **options)

    def admin_view(self, view: _View, cacheable: bool = False) -> _View:
        """Django's ``admin_view`` (login and permission required, CSRF, no caching), except that an
        htmx request from someone not logged in (an expired session) gets ``HX-Redirect`` to the
        login page, a full-page navigation, instead of a redirect that htmx would follow and swap
        into the fragment (a polling panel, a queue row, an editor step). After login the person
        comes back to the page htmx reports (``HX-Current-URL``, when it is on this site), else to
        the requested path. Every admin URL goes through here, custom views included."""
        protected = super().admin_view(view, cacheable)

        def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            htmx = getattr(request, "htmx", None)
            if htmx and not self.has_permission(request):
                login = reverse("admin:login", current_app=self.name)
                page = htmx.current_url_abs_path or request.get_full_path()
                return HttpResponseClientRedirect(f"{login}?{urlencode({'next': page})}")
            return protected(request, *args, **kwargs)

        return cast(_View, update_wrapper(inner if cacheable else never_cache(inner), protected))


class EstimatedCountPaginator(Paginator):
    """Uses PostgreSQL's row estimate for large unfiltered tables instead of ``COUNT(*)``."""

    @cached_property
    def count(self) -> int:
        query = self.object_list.query  # type: ignore[attr-defined]  # a QuerySet in every admin list
        if not query.where:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
                    [query.model._meta.db_table],
                )
                row = cursor.fetchone()
            if row and row[0] > 100_000:
                return int(row[0])
        return super().count


def shown(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with invisible and direction-changing characters
    (Unicode Cf, and control characters other than tab and newline) made visible as ``⟨U+202E⟩``, so
    a stored ``"\u202eexe.live"`` cannot display as something else. Storage stays byte for byte."""
    cut = text if len(text) <= limit else text[: limit - 3] + "..."
    return "".join(
        f"⟨U+{ord(ch):04X}⟩" if unicodedata.category(ch) in ("Cf", "Cc") and ch not in "\t\n" else ch
        for ch in cut
    )


class _SaveRefused(Exception):
    """A service refused an admin save: carries the refusal out of the change view's transaction."""

    def __init__(self, error: DomainError | ValidationError) -> None:
        super().__init__(str(error))
        self.error = error


_REFUSAL = "_engram_save_refusal"  # the request attribute that carries a refusal into the second pass


def refusal_to_form(form: forms.BaseForm, error: DomainError | ValidationError) -> None:
    """Put a service's refusal on ``form``: on the field it names when the form has that field,
    else as a form-wide error (a ``DomainError``'s ``errors`` and a ``ValidationError``'s fields alike)."""
    if isinstance(error, ValidationError):
        found: dict[str, list[str]] = (
            error.message_dict if hasattr(error, "error_dict") else {"": list(error.messages)}
        )
    else:
        found = dict(error.errors or {}) or {error.field or "": [error.message]}
    for field, texts in found.items():
        for message in texts:
            form.add_error(field if field in form.fields else None, message)


class ServiceSaveAdmin(admin.ModelAdmin):
    """A ModelAdmin whose add and change forms save through a service (``service_save``) that may
    refuse: a ``DomainError``, or Django's ``ValidationError`` from the service's ``full_clean``.

    Django's ``save_model`` is no veto point: once it returns, the view logs the ``LogEntry`` and
    says "added successfully" whatever happened inside. So a refusal is raised out of the change
    view, whose transaction rolls back everything the attempt wrote (row, trail event, log entry),
    and the view runs once more with the refusal added to the form's validation: the person sees
    the form as they sent it with the service's message on the field it names, and nothing else.
    Subclasses implement ``service_save`` instead of overriding ``save_model``."""

    def service_save(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        """Save ``obj`` (as the validated ``form`` left it) through the service that records it;
        raise the service's ``DomainError`` (or ``ValidationError``) to refuse."""
        raise NotImplementedError(f"{type(self).__name__} saves through a service: define service_save")

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        try:
            self.service_save(request, obj, form, change)
        except (DomainError, ValidationError) as error:
            raise _SaveRefused(error) from error

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except _SaveRefused as refused:  # the view's transaction is rolled back: show the form again
            setattr(request, _REFUSAL, refused.error)
            return super().changeform_view(request, object_id, form_url, extra_context)

    def get_form(
        self, request: HttpRequest, obj: Model | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form_class = super().get_form(request, obj, change=change, **kwargs)
        refusal: DomainError | ValidationError | None = getattr(request, _REFUSAL, None)
        if refusal is None:
            return form_class
        found = refusal

        class Refused(form_class):  # type: ignore[valid-type,misc]
            def clean(self) -> Any:
                data = super().clean()
                refusal_to_form(self, found)
                return data

        Refused.__name__ = form_class.__name__
        return Refused


class ReadOnlyAdminMixin:
    """Nobody adds, changes or deletes through this admin (models and inlines alike)."""

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


SESSION_TIMELINE_URL = "admin-session-timeline"  # mounted by config.urls (the compliance console)


def session_link(session_id: str | None) -> SafeString:
    """HTML: ``session_id`` as a link to its timeline (the admin's empty value for none); plain
    text where the timeline is not mounted (the platform admin)."""
    if not session_id:
        return format_html("{}", "-")
    try:
        url = reverse(SESSION_TIMELINE_URL)
    except NoReverseMatch:
        return format_html("{}", shown(session_id, 200))
    return format_html(
        '<a href="{}?{}">{}</a>', url, urlencode({"session": session_id}), shown(session_id, 200)
    )
