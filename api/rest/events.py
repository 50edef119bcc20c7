"""``/api/v1/events``: append to and read the episodic log."""

from __future__ import annotations

import json
from datetime import datetime, tzinfo
from typing import Any, cast

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response

from api.exceptions import batch_errors
from api.fields import (
    AwareDateTimeField,
    CleanCharField,
    JSONObjectField,
    NullIfBlankCharField,
    StrictSerializer,
    subject_field,
    subject_filter_field,
    tenant_json_max_depth,
)
from api.idempotency import idempotent
from api.pagination import CursorPage, PageParams, page_of
from api.schema import WHITESPACE, one_or_many
from api.views import AgentRequest, ApiView
from core.canonical_json import json_check
from core.errors import InvalidInput
from memory.episodic import selectors, services
from memory.episodic.models import Event, EventKind, EventRole

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
    data_subject = subject_field()

    # content with a character str.strip() keeps, or a non-empty payload
    schema_rules = {
        "allOf": [
            {
                "anyOf": [
                    {"required": ["content"], "properties": {"content": {"pattern": f"[^{WHITESPACE}]"}}},
                    {"required": ["payload"], "properties": {"payload": {"minProperties": 1}}},
                ]
            }
        ],
        "description": "Give content (not only whitespace), a non-empty payload, or both.",
    }

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
    data_subject = NullIfBlankCharField(help_text="the person this is about, null when none")
    redacted = serializers.SerializerMethodField()

    def get_redacted(self, event: Any) -> bool:
        return event.redacted_at is not None


_INPUT_FIELDS = frozenset(EventInputSerializer().fields)
_KINDS = frozenset(EventKind.values)
_ROLES = frozenset(EventRole.values)
_PAYLOAD_MAX_BYTES = cast(JSONObjectField, EventInputSerializer().fields["payload"]).max_bytes


def _plain_id(value: Any, max_length: int = 200) -> str | None:
    """A ``CleanCharField(max_length)``'s value for ``value`` when it accepts it as it is (a string,
    not blank once trimmed, at most ``max_length`` characters trimmed, no NUL); None otherwise."""
    if value.__class__ is not str:
        return None
    trimmed: str = value.strip()
    if not trimmed or len(trimmed) > max_length or "\x00" in trimmed:
        return None
    return trimmed


def _plain_time(value: Any, zone: tzinfo) -> datetime | None:
    """``AwareDateTimeField``'s value for an ISO 8601 string with an offset and no surrounding
    whitespace (what ``datetime.fromisoformat`` reads, and so ``parse_datetime`` first), in
    ``zone``; None for anything else."""
    if value.__class__ is not str or len(value) != len(value.strip()):
        return None
    try:
        parsed = datetime.fromisoformat(value)
        if parsed.utcoffset() is None:
            return None
        return parsed.astimezone(zone)
    except (ValueError, OverflowError):
        return None


def events_fast(items: list[Any]) -> list[services.EventData] | None:
    """The events of a request body (a list of parsed JSON items) when every item is plainly valid,
    with the values ``EventInputSerializer`` gives them; None when any item is not (then the
    serializer runs, and names each error). A one-pass check of the same rules without a DRF field
    per value: the serializer's per-event cost was about a third of an append request (profiled).

    Accepted only when the serializer accepts, with equal values (``tests/api/test_events_fast.py``
    compares the two on generated input): keys among the serializer's; ``session_id``,
    ``execution_id`` (or null) and ``data_subject`` as ``CleanCharField`` takes them (trimmed, not
    blank, at most 200 characters, no NUL); ``kind`` and ``role`` (default ``assistant``) among the
    choices; ``content`` (default ``""``) a string of at most 200,000 characters without NUL;
    ``payload`` (default ``{}``) an object passing ``json_check`` at the tenant's depth and at most
    256 KiB as ``json.dumps`` writes it; content or payload not empty; ``occurred_at`` an ISO 8601
    string with an offset, in the current time zone. Lone surrogates never reach a view (the
    parser refuses them)."""
    zone = timezone.get_current_timezone()
    depth: int | None = None
    out: list[services.EventData] = []
    for item in items:
        if item.__class__ is not dict or not _INPUT_FIELDS.issuperset(item):
            return None
        session_id = _plain_id(item.get("session_id"))
        kind = item.get("kind")
        role = item.get("role", EventRole.ASSISTANT)
        occurred_at = _plain_time(item.get("occurred_at"), zone)
        if kind.__class__ is not str or role.__class__ not in (str, EventRole):
            return None
        if session_id is None or occurred_at is None or kind not in _KINDS or role not in _ROLES:
            return None
        execution_id = item.get("execution_id")
        if execution_id is not None:
            execution_id = _plain_id(execution_id)
            if execution_id is None:
                return None
        data_subject = ""
        if "data_subject" in item:
            data_subject = _plain_id(item["data_subject"])  # type: ignore[assignment]
            if data_subject is None:
                return None
        content = item.get("content", "")
        if content.__class__ is not str or len(content) > MAX_EVENT_CONTENT_CHARS or "\x00" in content:
            return None
        payload = item.get("payload", None)
        if payload is None:
            if "payload" in item:
                return None
            payload = {}
        elif payload.__class__ is not dict:
            return None
        elif payload:
            if depth is None:
                depth = tenant_json_max_depth()
            try:
                json_check(payload, root="payload", max_depth=depth, numbers=True)
            except InvalidInput:
                return None
            if len(json.dumps(payload, ensure_ascii=False).encode()) > _PAYLOAD_MAX_BYTES:
                return None
        if not payload and not content.strip():
            return None
        out.append(
            services.EventData(
                session_id=session_id,
                execution_id=execution_id,
                role=role,
                kind=kind,
                content=content,
                payload=payload,
                occurred_at=occurred_at,
                data_subject=data_subject,
            )
        )
    return out


def _utc_text(moment: datetime, zone: tzinfo) -> str:
    """A datetime as DRF's ``DateTimeField`` writes it (ISO 8601 in ``zone``, ``Z`` for UTC)."""
    text = moment.astimezone(zone).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def event_json(event: Event, zone: tzinfo) -> dict[str, Any]:
    """``EventOutputSerializer(event).data`` built directly (a dict per event instead of a DRF field
    per value: the other third of an append request; ``tests/api/test_events_fast.py`` compares
    the two). ``zone``: the current time zone (``timezone.get_current_timezone()``)."""
    return {
        "id": event.pk,
        "seq": event.seq,
        "session_id": event.session_id,
        "execution_id": event.execution_id,
        "agent": event.agent.name,
        "role": str(event.role),
        "kind": str(event.kind),
        "content": event.content,
        "payload": event.payload,
        "occurred_at": _utc_text(event.occurred_at, zone),
        "recorded_at": _utc_text(event.recorded_at, zone),
        "prev_hash": event.prev_hash,
        "hash": event.hash,
        "data_subject": event.data_subject or None,
        "redacted": event.redacted_at is not None,
    }


class EventListParams(StrictSerializer, PageParams):
    unknown_key_message = "Unknown query parameter."
    session_id = CleanCharField(required=False, max_length=200)
    execution_id = CleanCharField(required=False, max_length=200)
    agent = CleanCharField(required=False, max_length=100, help_text="the name of the agent that wrote it")
    kind = serializers.ListField(
        child=serializers.ChoiceField(choices=EventKind.choices),
        required=False,
        help_text="repeat or comma-separate: kind=message,decision",
    )
    since = AwareDateTimeField(required=False, help_text="occurred_at >= since")
    until = AwareDateTimeField(required=False, help_text="occurred_at < until")
    q = CleanCharField(required=False, max_length=1000, help_text="full text (web search syntax)")
    data_subject = subject_filter_field()


class EventsPage(CursorPage):
    """Oldest first."""

    ordering = ("occurred_at", "seq")


@extend_schema_serializer(component_name="EventBatch")
class EventBatchOutputSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    results = EventOutputSerializer(many=True)


EVENT_EXAMPLE = {
    "session_id": "s1",
    "kind": "tool_call",
    "role": "assistant",
    "content": "Looking up the weather in Lisbon",
    "payload": {"tool": "weather", "args": {"city": "Lisbon"}},
    "occurred_at": "2026-11-30T09:00:00Z",
}


class EventsView(ApiView):
    """POST one event (an object) or a batch (an array, at most 1,000, all or nothing); GET a page."""

    get_query_params = frozenset(EventListParams().fields)
    repeatable_query_params = frozenset({"kind"})
    error_statuses = {"post": (409, 413)}

    @extend_schema(
        operation_id="events_append",
        summary="Append events",
        description="One event (an object) or a batch (an array of 1 to 1,000, all or nothing), each "
        "linked into the tenant's hash chain. The payload is kept as RFC 8785 canonical JSON and "
        "returned as stored.",
        request=one_or_many(EventInputSerializer, "EventInput", max_items=settings.ENGRAM["MAX_EVENT_BATCH"]),
        responses={201: one_or_many(EventOutputSerializer, "EventCreated", batch=EventBatchOutputSerializer)},
        examples=[OpenApiExample("A tool call", value=EVENT_EXAMPLE, request_only=True)],
        tags=["episodic"],
    )
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
        parsed = events_fast(items)
        if parsed is None:
            serializer = EventInputSerializer(data=items, many=True)
            if not serializer.is_valid():
                raise serializers.ValidationError(
                    batch_errors(serializer.errors, name="events", single=single)
                )
            parsed = [services.EventData(**attrs) for attrs in serializer.validated_data]
        events = services.events_append(agent=request.user, events=parsed)
        zone = timezone.get_current_timezone()
        out = [event_json(event, zone) for event in events]
        body = out[0] if single else {"count": len(out), "results": out}
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="events_list",
        summary="List events",
        parameters=[EventListParams],
        responses={200: page_of(EventOutputSerializer, "Event")},
        tags=["episodic"],
    )
    def get(self, request: AgentRequest) -> Response:
        raw: dict[str, Any] = request.query_params.dict()
        if "kind" in raw:
            raw["kind"] = [k for value in request.query_params.getlist("kind") for k in value.split(",") if k]
        p = self.query(EventListParams, raw)
        kinds = sorted(set(p.get("kind", ())))
        qs = selectors.event_list(
            agent=request.user,
            data_subject=p.get("data_subject"),
            session_id=p.get("session_id"),
            execution_id=p.get("execution_id"),
            agent_name=p.get("agent"),
            kinds=kinds or None,
            occurred_from=p.get("since"),
            occurred_to=p.get("until"),
            q=p.get("q"),
        )
        paginator = EventsPage()
        page = paginator.paginate_queryset(qs, request, view=self)
        zone = timezone.get_current_timezone()
        return paginator.get_paginated_response([event_json(event, zone) for event in page])
