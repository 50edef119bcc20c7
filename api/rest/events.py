"""``/api/v1/events``: append to and read the episodic log."""

from __future__ import annotations

from typing import Any

from django.conf import settings
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
)
from api.idempotency import idempotent
from api.pagination import CursorPage, PageParams, page_of
from api.schema import one_or_many
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
    data_subject = NullIfBlankCharField(help_text="the person this is about, null when none")
    redacted = serializers.SerializerMethodField()

    def get_redacted(self, event: Any) -> bool:
        return event.redacted_at is not None


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
        request=one_or_many(EventInputSerializer, "EventInput"),
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
        serializer = EventInputSerializer(data=items, many=True)
        if not serializer.is_valid():
            raise serializers.ValidationError(batch_errors(serializer.errors, name="events", single=single))
        events = services.events_append(
            agent=request.user, events=[services.EventData(**attrs) for attrs in serializer.validated_data]
        )
        out = EventOutputSerializer(events, many=True).data
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
        return paginator.get_paginated_response(EventOutputSerializer(page, many=True).data)
