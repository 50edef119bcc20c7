"""Building blocks shared by the memory admins: read-only models, cheap counts, safe display."""

from __future__ import annotations

import unicodedata
from functools import cached_property
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.db import connection
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """An admin request as django-htmx's middleware leaves it: ``request.htmx`` says whether htmx sent
    it (a type for annotations, as django-htmx's documentation suggests)."""

    htmx: HtmxDetails


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
