"""Working memory over HTTP: ``/api/v1/executions/{id}/blackboard|scratchpad|close`` and
``/api/v1/sessions/{id}/window``. Redis down → 503; values over the tenant's limit → 413.

The blackboard is readable by every agent of the tenant, a scratchpad only by its agent, and an
execution can be closed only by the agent that started it (see ``memory.working.services``)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers, status
from rest_framework.response import Response

from api.fields import CleanCharField, JSONValueField, StrictIntegerField, StrictSerializer
from api.idempotency import idempotent
from api.views import AgentRequest, ApiView
from core.errors import NotFound
from memory.episodic.models import EventRole
from memory.working import services


class AnyJSONValue(JSONValueField):
    """Any JSON value, ``null`` included."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, **kwargs)


class BlackboardWriteSerializer(StrictSerializer):
    value = AnyJSONValue()
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
    session_id = CleanCharField(required=False, max_length=200)


class WindowAppendSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=EventRole.choices)
    content = CleanCharField(trim_whitespace=False)


class WindowParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    last = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=20)


class BlackboardParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    agent = CleanCharField(required=False, max_length=100)


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise serializers.ValidationError({"body": ["Expected a JSON object."]})
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class BlackboardView(ApiView):
    """GET every field of the execution's blackboard (``?agent=`` for one agent's fields)."""

    get_query_params = frozenset({"agent"})

    def get(self, request: AgentRequest, execution_id: str) -> Response:
        params = _valid(BlackboardParams, request.query_params.dict())
        entries = services.blackboard_read(
            reader=request.user, execution_id=execution_id, agent_name=params.get("agent")
        )
        return Response({"execution_id": execution_id, "fields": [e.as_dict() for e in entries]})


class BlackboardFieldWriteView(ApiView):
    """PUT ``{"value": ..., "expected_version"?: n}`` to write the caller's own field ``<agent>:<field>``."""

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
        return Response(entry.as_dict())


class BlackboardFieldReadView(ApiView):
    """GET one field written by ``agent``."""

    def get(self, request: AgentRequest, execution_id: str, agent: str, field: str) -> Response:
        entry = services.blackboard_get(
            reader=request.user, execution_id=execution_id, agent_name=agent, name=field
        )
        return Response(entry.as_dict())


class ScratchpadView(ApiView):
    """GET the caller's private scratchpad for the execution."""

    def get(self, request: AgentRequest, execution_id: str) -> Response:
        values = services.scratchpad_read(agent=request.user, execution_id=execution_id)
        return Response({"execution_id": execution_id, "values": values})


class ScratchpadKeyView(ApiView):
    """PUT ``{"value": ...}`` or DELETE one key of the caller's scratchpad."""

    def put(self, request: AgentRequest, execution_id: str, key: str) -> Response:
        data = _valid(ScratchpadWriteSerializer, request.data)
        services.scratchpad_write(
            agent=request.user,
            execution_id=execution_id,
            key=key,
            value=data["value"],
            policy=request.tenant.working_memory_policy,
            session_id=data.get("session_id"),
        )
        return Response({"execution_id": execution_id, "key": key, "value": data["value"]})

    def delete(self, request: AgentRequest, execution_id: str, key: str) -> Response:
        if not services.scratchpad_delete(agent=request.user, execution_id=execution_id, key=key):
            raise NotFound(f"No key {key} in your scratchpad.", field="key")
        return Response(status=status.HTTP_204_NO_CONTENT)


class ExecutionCloseView(ApiView):
    """POST to close: scratchpads deleted, blackboard kept until its TTL, a decision event logged.

    Only the execution's owner (the agent that started it) may close it: 403 ``permission_denied``
    for another agent, 404 for an execution nothing was ever written to (or that expired).
    """

    @idempotent
    def post(self, request: AgentRequest, execution_id: str) -> Response:
        data = _valid(CloseSerializer, request.data or {})
        event = services.execution_close(
            agent=request.user, execution_id=execution_id, session_id=data.get("session_id")
        )
        return Response(
            {
                "execution_id": execution_id,
                "closed": True,
                "event_id": event.pk,
                "event_seq": event.seq,
                "blackboard": event.payload["blackboard"],
            }
        )


class WindowView(ApiView):
    """POST a turn to the session's conversation window; GET the last ``?last=N`` turns."""

    get_query_params = frozenset({"last"})

    @idempotent
    def post(self, request: AgentRequest, session_id: str) -> Response:
        data = _valid(WindowAppendSerializer, request.data)
        length = services.window_append(
            agent=request.user,
            session_id=session_id,
            role=data["role"],
            content=data["content"],
            policy=request.tenant.working_memory_policy,
        )
        return Response({"session_id": session_id, "length": length}, status=status.HTTP_201_CREATED)

    def get(self, request: AgentRequest, session_id: str) -> Response:
        params = _valid(WindowParams, request.query_params.dict())
        turns = services.window_read(agent=request.user, session_id=session_id, last=params["last"])
        return Response({"session_id": session_id, "turns": turns})
