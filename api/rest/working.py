"""Working memory over HTTP: ``/api/v1/executions/{id}/blackboard|scratchpad|close`` and
``/api/v1/sessions/{id}/window``. Redis down → 503; values over the tenant's limit → 413.

A PUT that creates a field or key answers 201, one that replaces it 200 (docs/guides/agents/rest.md, Conventions).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response

from api.fields import (
    CleanCharField,
    JSONValueField,
    StrictIntegerField,
    StrictQueryInteger,
    StrictSerializer,
    subject_field,
)
from api.idempotency import idempotent
from api.views import AgentRequest, ApiView
from core.errors import NotFound
from memory.episodic.models import EventRole
from memory.working import services


@extend_schema_field(OpenApiTypes.ANY)
class AnyJSONValue(JSONValueField):
    """Any JSON value, ``null`` included."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, **kwargs)


class BlackboardWriteSerializer(StrictSerializer):
    value = AnyJSONValue(help_text="any JSON value, at most the tenant's working-memory limit (10 KiB)")
    expected_version = StrictIntegerField(
        required=False, min_value=0, help_text="compare-and-set: 0 means the field must not exist yet"
    )
    session_id = CleanCharField(
        required=False,
        max_length=200,
        help_text="the session the execution belongs to (kept from its first write)",
    )


class ScratchpadWriteSerializer(StrictSerializer):
    value = AnyJSONValue()
    session_id = CleanCharField(
        required=False,
        max_length=200,
        help_text="the session the execution belongs to (kept from its first write)",
    )


class CloseSerializer(StrictSerializer):
    session_id = CleanCharField(
        required=False, max_length=200, help_text="the session the close decision is logged in"
    )


class WindowAppendSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=EventRole.choices)
    content = CleanCharField(trim_whitespace=False)
    data_subject = subject_field()


class WindowParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    last = StrictQueryInteger(
        required=False, min_value=1, max_value=1000, default=20, help_text="how many turns"
    )


class BlackboardParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    agent = CleanCharField(required=False, max_length=100, help_text="only this agent's fields")


@extend_schema_serializer(component_name="BlackboardEntry")
class BlackboardEntrySerializer(serializers.Serializer):
    field = serializers.CharField(help_text="<agent>:<name>")
    agent = serializers.CharField()
    version = serializers.IntegerField(help_text="counts writes from 1")
    updated_at = serializers.DateTimeField()
    value = AnyJSONValue()


class BlackboardOutputSerializer(serializers.Serializer):
    execution_id = serializers.CharField()
    results = BlackboardEntrySerializer(many=True)


class ScratchpadOutputSerializer(serializers.Serializer):
    execution_id = serializers.CharField()
    values = serializers.DictField(child=AnyJSONValue(), help_text="key → value")


class ScratchpadValueSerializer(serializers.Serializer):
    execution_id = serializers.CharField()
    key = serializers.CharField()
    value = AnyJSONValue()


class ScratchpadClearedSerializer(serializers.Serializer):
    execution_id = serializers.CharField()
    deleted = serializers.IntegerField(help_text="how many keys the scratchpad held")


class BlackboardSummarySerializer(serializers.Serializer):
    field = serializers.CharField()
    agent = serializers.CharField()
    version = serializers.IntegerField()
    updated_at = serializers.DateTimeField()
    value = AnyJSONValue(help_text="null when longer than 500 characters of JSON: see value_truncated")
    value_truncated = serializers.CharField(allow_null=True)


class CloseOutputSerializer(serializers.Serializer):
    execution_id = serializers.CharField()
    closed = serializers.BooleanField()
    event_id = serializers.IntegerField(help_text="the decision event that records the close")
    event_seq = serializers.IntegerField()
    blackboard = BlackboardSummarySerializer(many=True)


class WindowAppendedSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    length = serializers.IntegerField(help_text="turns in the window after the append")


class TurnSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=EventRole.choices)
    content = serializers.CharField(trim_whitespace=False)
    agent = serializers.CharField()
    at = serializers.DateTimeField()


class WindowOutputSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    results = TurnSerializer(many=True, help_text="oldest first")


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise serializers.ValidationError({"body": ["Expected a JSON object."]})
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


TAGS = ["working memory"]


class BlackboardView(ApiView):
    """GET every field of the execution's blackboard (``?agent=`` for one agent's fields)."""

    get_query_params = frozenset({"agent"})
    error_statuses = (503,)

    @extend_schema(
        operation_id="blackboard_read",
        summary="Read the blackboard",
        parameters=[BlackboardParams],
        responses={200: BlackboardOutputSerializer},
        tags=TAGS,
    )
    def get(self, request: AgentRequest, execution_id: str) -> Response:
        params = self.query(BlackboardParams)
        entries = services.blackboard_read(
            reader=request.user, execution_id=execution_id, agent_name=params.get("agent")
        )
        body = {"execution_id": execution_id, "results": [e.as_dict() for e in entries]}
        return Response(BlackboardOutputSerializer(body).data)


class BlackboardFieldWriteView(ApiView):
    """PUT ``{"value": ..., "expected_version"?: n}`` to write the caller's own field ``<agent>:<field>``."""

    error_statuses = (409, 413, 503)

    @extend_schema(
        operation_id="blackboard_write",
        summary="Write your field on the blackboard",
        request=BlackboardWriteSerializer,
        responses={201: BlackboardEntrySerializer, 200: BlackboardEntrySerializer},
        examples=[
            OpenApiExample(
                "A plan step", value={"value": {"step": 2}, "expected_version": 1}, request_only=True
            )
        ],
        tags=TAGS,
    )
    def put(self, request: AgentRequest, execution_id: str, field: str) -> Response:
        data = _valid(BlackboardWriteSerializer, request.data)
        entry = services.blackboard_write(
            agent=request.user,
            execution_id=execution_id,
            name=field,
            value=data["value"],
            expected_version=data.get("expected_version"),
            policy=request.tenant.working_memory_policy,
            session_id=data.get("session_id"),
        )
        created = entry.version == 1
        return Response(
            BlackboardEntrySerializer(entry.as_dict()).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class BlackboardFieldReadView(ApiView):
    """GET one field written by ``agent``."""

    error_statuses = (503,)

    @extend_schema(
        operation_id="blackboard_field",
        summary="Read one blackboard field",
        responses={200: BlackboardEntrySerializer},
        tags=TAGS,
    )
    def get(self, request: AgentRequest, execution_id: str, agent: str, field: str) -> Response:
        entry = services.blackboard_get(
            reader=request.user, execution_id=execution_id, agent_name=agent, name=field
        )
        return Response(BlackboardEntrySerializer(entry.as_dict()).data)


class ScratchpadView(ApiView):
    """GET the caller's private scratchpad for the execution; DELETE all of it."""

    error_statuses = (503,)

    @extend_schema(
        operation_id="scratchpad_read",
        summary="Read your scratchpad",
        responses={200: ScratchpadOutputSerializer},
        tags=TAGS,
    )
    def get(self, request: AgentRequest, execution_id: str) -> Response:
        values = services.scratchpad_read(agent=request.user, execution_id=execution_id)
        return Response(ScratchpadOutputSerializer({"execution_id": execution_id, "values": values}).data)

    @extend_schema(
        operation_id="scratchpad_clear",
        summary="Clear your scratchpad",
        responses={200: ScratchpadClearedSerializer},
        tags=TAGS,
    )
    def delete(self, request: AgentRequest, execution_id: str) -> Response:
        deleted = services.scratchpad_clear(agent=request.user, execution_id=execution_id)
        return Response(ScratchpadClearedSerializer({"execution_id": execution_id, "deleted": deleted}).data)


class ScratchpadKeyView(ApiView):
    """GET, PUT ``{"value": ...}`` or DELETE one key of the caller's scratchpad."""

    error_statuses = {"put": (409, 413, 503), "get": (503,), "delete": (503,)}

    @extend_schema(
        operation_id="scratchpad_get",
        summary="Read one scratchpad key",
        responses={200: ScratchpadValueSerializer},
        tags=TAGS,
    )
    def get(self, request: AgentRequest, execution_id: str, key: str) -> Response:
        value = services.scratchpad_get(agent=request.user, execution_id=execution_id, key=key)
        return Response(
            ScratchpadValueSerializer({"execution_id": execution_id, "key": key, "value": value}).data
        )

    @extend_schema(
        operation_id="scratchpad_write",
        summary="Write one scratchpad key",
        request=ScratchpadWriteSerializer,
        responses={201: ScratchpadValueSerializer, 200: ScratchpadValueSerializer},
        tags=TAGS,
    )
    def put(self, request: AgentRequest, execution_id: str, key: str) -> Response:
        data = _valid(ScratchpadWriteSerializer, request.data)
        created = services.scratchpad_write(
            agent=request.user,
            execution_id=execution_id,
            key=key,
            value=data["value"],
            policy=request.tenant.working_memory_policy,
            session_id=data.get("session_id"),
        )
        body = ScratchpadValueSerializer(
            {"execution_id": execution_id, "key": key, "value": data["value"]}
        ).data
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(
        operation_id="scratchpad_delete",
        summary="Delete one scratchpad key",
        responses={204: None},
        tags=TAGS,
    )
    def delete(self, request: AgentRequest, execution_id: str, key: str) -> Response:
        if not services.scratchpad_delete(agent=request.user, execution_id=execution_id, key=key):
            raise NotFound(f"No key {key} in your scratchpad.", field="key")
        return Response(status=status.HTTP_204_NO_CONTENT)


class ExecutionCloseView(ApiView):
    """POST to close: scratchpads deleted, blackboard kept until its TTL, a decision event logged.
    Only the execution's owner (its first writer) may close it."""

    error_statuses = (409, 503)

    @extend_schema(
        operation_id="execution_close",
        summary="Close an execution",
        request=CloseSerializer,
        responses={200: CloseOutputSerializer},
        tags=TAGS,
    )
    @idempotent
    def post(self, request: AgentRequest, execution_id: str) -> Response:
        data = _valid(CloseSerializer, request.data or {})
        event = services.execution_close(
            agent=request.user, execution_id=execution_id, session_id=data.get("session_id")
        )
        body = {
            "execution_id": execution_id,
            "closed": True,
            "event_id": event.pk,
            "event_seq": event.seq,
            "blackboard": event.payload["blackboard"],
        }
        return Response(CloseOutputSerializer(body).data)


class WindowView(ApiView):
    """POST a turn to the session's conversation window; GET the last ``?last=N`` turns."""

    get_query_params = frozenset({"last"})
    error_statuses = {"post": (409, 413, 503), "get": (503,)}

    @extend_schema(
        operation_id="window_append",
        summary="Append a turn to the conversation window",
        request=WindowAppendSerializer,
        responses={201: WindowAppendedSerializer},
        tags=TAGS,
    )
    @idempotent
    def post(self, request: AgentRequest, session_id: str) -> Response:
        data = _valid(WindowAppendSerializer, request.data)
        length = services.window_append(
            agent=request.user,
            session_id=session_id,
            role=data["role"],
            content=data["content"],
            policy=request.tenant.working_memory_policy,
            data_subject=data["data_subject"],
        )
        body = WindowAppendedSerializer({"session_id": session_id, "length": length}).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="window_read",
        summary="The last turns of the conversation window",
        parameters=[WindowParams],
        responses={200: WindowOutputSerializer},
        tags=TAGS,
    )
    def get(self, request: AgentRequest, session_id: str) -> Response:
        params = self.query(WindowParams)
        turns = services.window_read(agent=request.user, session_id=session_id, last=params["last"])
        return Response(WindowOutputSerializer({"session_id": session_id, "results": turns}).data)
