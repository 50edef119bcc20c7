"""Cursor pages: the one list envelope ``{"results": [...], "next": url|null, "previous": url|null}``.

A list view subclasses ``CursorPage`` with its ``ordering`` and renders a page with
``paginator.get_paginated_response(data)``; ``page_of(Serializer)`` is that envelope's schema.
Cursors are opaque (DRF's cursor pagination: the position of the boundary row, so pages stay right
while rows are added); only the links the API gives are accepted.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from typing import Any
from urllib import parse

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination

from api.fields import StrictQueryInteger
from core.errors import NotFound as DomainNotFound

MAX_PAGE_SIZE = 500


class CursorPage(CursorPagination):
    """DRF's cursor pagination with ``limit`` (1 to 500, default 100); a cursor that names no page is a
    404 naming ``cursor``."""

    page_size = 100
    page_size_query_param = "limit"
    max_page_size = MAX_PAGE_SIZE

    def decode_cursor(self, request: Any) -> Cursor | None:
        """DRF's decoding, made strict: its lenient base64 turned ``%%%`` into an empty cursor, which
        read as "page 1". Only what ``encode_cursor`` makes is accepted: strict base64 of a non-empty
        query string holding at most ``o`` (offset), ``r`` (reverse) and ``p`` (position), once each."""
        encoded = request.query_params.get(self.cursor_query_param)
        if encoded is None:
            return None
        try:
            querystring = b64decode(encoded.encode("ascii"), validate=True).decode("ascii")
            tokens = parse.parse_qs(querystring, keep_blank_values=True, strict_parsing=True)
        except (UnicodeError, binascii.Error, ValueError):
            raise NotFound(self.invalid_cursor_message) from None
        if not tokens or set(tokens) - {"o", "r", "p"} or any(len(v) != 1 for v in tokens.values()):
            raise NotFound(self.invalid_cursor_message)
        if tokens.get("r", ["1"])[0] != "1" or not tokens.get("o", ["1"])[0].isdigit():
            raise NotFound(self.invalid_cursor_message)
        return super().decode_cursor(request)

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> Any:
        try:
            return super().paginate_queryset(queryset, request, view)
        except (NotFound, DjangoValidationError, ValueError, TypeError):
            raise cursor_not_found("Invalid cursor: use the next/previous links as given.") from None


def cursor_not_found(message: str, field: str = "cursor") -> DomainNotFound:
    """The error of a cursor that names no page: a 404 naming ``field``, as DRF's own cursor
    pagination answers (docs/decisions/0050-a-cursor-that-names-no-page-is-a-404.md); the document
    declares 404 on every operation that takes a cursor (``api.schema``)."""
    return DomainNotFound(message, field=field)


class PageParams(serializers.Serializer):
    """The query parameters of every list (mixed into its own parameters serializer)."""

    cursor = serializers.CharField(required=False, help_text="from a page's `next` or `previous` link")
    limit = StrictQueryInteger(
        required=False, min_value=1, max_value=MAX_PAGE_SIZE, help_text="items per page (default 100)"
    )


_pages: dict[str, type[serializers.Serializer]] = {}


def page_of(item: type[serializers.Serializer], name: str) -> type[serializers.Serializer]:
    """The schema of a page of ``item``: component ``<name>Page``."""
    if name not in _pages:

        @extend_schema_serializer(component_name=f"{name}Page")
        class Page(serializers.Serializer):
            results = item(many=True)
            next = serializers.URLField(allow_null=True, help_text="the next page, null on the last")
            previous = serializers.URLField(allow_null=True, help_text="the previous page, null on the first")

        Page.__name__ = f"{name}Page"
        _pages[name] = Page
    return _pages[name]
