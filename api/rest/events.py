"""``/api/v1/events``: append to and read the episodic log."""

from __future__ import annotations

import binascii
from base64 import b64decode
from typing import Any
from urllib import parse

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.response import Response

from api.fields import AwareDateTimeField, CleanCharField, JSONObjectField, StrictSerializer
from api.idempotency import idempotent
from api.views import AgentRequest, ApiView
from memory.episodic import selectors, services
from memory.episodic.models import EventKind, EventRole

MAX_EVENT_CONTENT_CHARS = 200_000


class EventInputSerializer(StrictSerializer):
    session_id = CleanCharField(max_length=200)
    execution_id = CleanCharField(max_length=200, required=False, allow_null=True)
    role = serializers.ChoiceField(choices=EventRole.choices, default=EventRole.ASSISTANT)
    kind = serializers.ChoiceField(choices=EventKind.choices)
    content = CleanCharField(
        max_length=MAX_EVENT_CONTENT_CHARS, allow_blank=True, trim_whitespace=False, default=""
    )
    payload = JSONObjectField(required=False, default=dict, numbers=True)
    occurred_at = AwareDateTimeField()
    data_subject = CleanCharField(
        max_length=200,
        required=False,
        default="",
        help_text="the person this is about (erasure and legal holds target it)",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs["content"].strip() and not attrs["payload"]:
            raise serializers.ValidationError({"content": ["Give content, a payload, or both."]})
        return attrs


class EventOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    session_id = serializers.CharField()
    execution_id = serializers.CharField(allow_null=True)
    agent = serializers.CharField(source="agent.name")
    role = serializers.CharField()
    kind = serializers.CharField()
    content = serializers.CharField(trim_whitespace=False)
    payload = serializers.JSONField()
    occurred_at = serializers.DateTimeField()
    recorded_at = serializers.DateTimeField()
    prev_hash = serializers.CharField()
    hash = serializers.CharField()
    data_subject = serializers.CharField()
    redacted = serializers.SerializerMethodField()

    def get_redacted(self, event: Any) -> bool:
        return event.redacted_at is not None


class EventListParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    session_id = CleanCharField(required=False, max_length=200)
    execution_id = CleanCharField(required=False, max_length=200)
    agent = CleanCharField(required=False, max_length=100)
    kind = serializers.ListField(
        child=serializers.ChoiceField(choices=EventKind.choices),
        required=False,
        help_text="repeat or comma-separate: kind=message,decision",
    )
    since = AwareDateTimeField(required=False, help_text="occurred_at >= since")
    until = AwareDateTimeField(required=False, help_text="occurred_at < until")
    q = CleanCharField(required=False, max_length=1000)
    cursor = serializers.CharField(required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500)


class ChronologicalCursor(CursorPagination):
    """DRF's cursor pagination, oldest first; a bad cursor is a 400 naming ``cursor``."""

    ordering = ("occurred_at", "seq")
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 500

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
            raise serializers.ValidationError(
                {"cursor": ["Invalid cursor: use the next/previous links as given."]}
            ) from None


def _flatten_batch_errors(errors: Any, *, single: bool) -> dict[str, Any]:
    """``{0: {"kind": [...]}}`` (or a list of dicts) → ``{"events[0].kind": [...]}``; plain names for one event."""
    items = errors.items() if isinstance(errors, dict) else enumerate(errors)
    flat: dict[str, Any] = {}
    for index, item in items:
        if not isinstance(item, dict):
            flat["events" if single else f"events[{index}]"] = item
            continue
        for name, messages in item.items():
            flat[name if single else f"events[{index}].{name}"] = messages
    return flat


class EventsView(ApiView):
    """POST one event (an object) or a batch (an array, at most 1,000, all or nothing); GET a page."""

    get_query_params = frozenset(EventListParams().fields)
    repeatable_query_params = frozenset({"kind"})

    @idempotent
    def post(self, request: AgentRequest) -> Response:
        data = request.data
        single = isinstance(data, dict)
        items = [data] if single else data
        if not isinstance(items, list):
            raise serializers.ValidationError({"body": ["Send an event object or an array of events."]})
        limit = settings.ENGRAM["MAX_EVENT_BATCH"]
        if not items or len(items) > limit:
            raise serializers.ValidationError({"events": [f"Send between 1 and {limit} events."]})
        serializer = EventInputSerializer(data=items, many=True)
        if not serializer.is_valid():
            raise serializers.ValidationError(_flatten_batch_errors(serializer.errors, single=single))
        events = services.events_append(
            agent=request.user, events=[services.EventData(**attrs) for attrs in serializer.validated_data]
        )
        out = EventOutputSerializer(events, many=True).data
        body = out[0] if single else {"count": len(out), "events": out}
        return Response(body, status=status.HTTP_201_CREATED)

    def get(self, request: AgentRequest) -> Response:
        raw: dict[str, Any] = request.query_params.dict()
        if "kind" in raw:
            raw["kind"] = [k for value in request.query_params.getlist("kind") for k in value.split(",") if k]
        params = EventListParams(data=raw)
        params.is_valid(raise_exception=True)
        p = params.validated_data
        kinds = sorted(set(p.get("kind", ())))
        qs = selectors.event_list(
            session_id=p.get("session_id"),
            execution_id=p.get("execution_id"),
            agent_name=p.get("agent"),
            kinds=kinds or None,
            occurred_from=p.get("since"),
            occurred_to=p.get("until"),
            q=p.get("q"),
        )
        paginator = ChronologicalCursor()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(EventOutputSerializer(page, many=True).data)
